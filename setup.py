"""open_seq2seq: config-driven sequence-to-sequence training on TensorFlow 2 / Keras 3."""

import os

from setuptools import find_packages, setup

# CPU-only TensorFlow by default. On GPU hosts install with
#   OPEN_SEQ2SEQ_TF="tensorflow[and-cuda]" pip install -e .
# (an extra cannot replace tensorflow-cpu: both wheels provide the same package).
TENSORFLOW = os.environ.get("OPEN_SEQ2SEQ_TF", "tensorflow-cpu") + ">=2.21"

setup(
    name="open_seq2seq",
    version="0.1.0",
    description="Sequence-to-sequence training toolkit (translation, speech) on TensorFlow 2",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=find_packages(include=["open_seq2seq", "open_seq2seq.*"]),
    include_package_data=True,
    package_data={"open_seq2seq": ["test_utils/toy_speech_data/vocab.txt",
                                    "test_utils/vocab_tts.txt",
                                    "params_index.json"]},  # read by config_static.py
    install_requires=[
        TENSORFLOW,
        "numpy",
        "sentencepiece",
        "sacrebleu>=2",
        "pyyaml",
        "tensorboard",  # tf.summary needs it; tensorflow-cpu does not pull it in
        "scipy",  # speech features
        "soundfile",  # speech audio I/O
        "inflect",  # numbers to words in the speech-synthesis text cleaner (MIT licence)
        "matplotlib>=3.5",  # speech synthesis' alignment figures (Agg; imported when drawing)
    ],
    extras_require={
        # CTC beam search with n-gram LM fusion: our prefix beam search scores words with KenLM
        "lm": ["kenlm"],
        "plots": ["matplotlib"],  # scripts/plot_run.py: training curves as a PNG
        "psf": ["python_speech_features"],  # speech data_layer_params/backend: "psf" (MIT)
        "tts": ["librosa==0.11.*"],  # FastPitch's frame pitch (pYIN / YIN)
        # scripts/intelligibility.py: an independent recognizer (PocketSphinx 5, BSD; its
        # wheel ships the US English acoustic model, dictionary and LM, so it runs offline)
        "tts-eval": ["pocketsphinx>=5,<6"],
        # kenlm builds from source (~2 min)
        # ctranslate2: --export_format=ctranslate2 (tests/*/test_ctranslate2_export.py)
        "test": ["pytest", "pytest-xdist", "librosa==0.11.*", "jiwer", "kenlm", "rdata>=1.1",
                 "matplotlib", "python_speech_features", "ctranslate2", "pocketsphinx>=5,<6"],
    },
    entry_points={"console_scripts": ["open-seq2seq=open_seq2seq.process_defaults:main"]},
)
