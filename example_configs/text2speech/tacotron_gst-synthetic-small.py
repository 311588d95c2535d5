# pylint: skip-file
"""tacotron-synthetic-small.py with global style tokens, on a corpus spoken at two rates.

    python scripts/make_synthetic_speech.py --tts --speeds=110,220 --output_dir=data/synth_gst
    TTS_DATA=data/synth_gst python run.py \
        --config_file=example_configs/text2speech/tacotron_gst-synthetic-small.py --mode=train_eval

Every utterance is its own style reference in training; nothing says which rate it has, so
the style tokens have to learn it to predict the frames. At inference,
``--data_layer_params/style_wav=<a slow or fast clip>`` speaks every test sentence at that
clip's rate (``interactive_infer`` needs it, or ``encoder_params/style_embedding_params/
token_weights``).
"""
import copy
import os
import runpy

_small = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "tacotron-synthetic-small.py"))

base_model = _small["base_model"]
base_params = copy.deepcopy(_small["base_params"])
base_params["logdir"] = "runs/tacotron_gst-synthetic-small"
base_params["encoder_params"].update({
    "style_embedding_enable": True,
    "style_embedding_params": {
        "conv_layers": [{"kernel_size": [3, 3], "stride": [2, 2], "num_channels": c,
                         "padding": "SAME"} for c in (16, 16, 32, 32)],
        "num_rnn_layers": 1,
        "rnn_cell_dim": 32,
        "rnn_unidirectional": True,
        "rnn_type": "gru",
        "reference_size": 32,
        "emb_size": 32,
        "attention_layer_size": 32,
        "num_tokens": 8,
        "num_heads": 2,
    },
})
base_params["data_layer_params"]["style_input"] = "wav"

train_params = _small["train_params"]
eval_params = _small["eval_params"]
infer_params = _small["infer_params"]
interactive_infer_params = _small["interactive_infer_params"]
