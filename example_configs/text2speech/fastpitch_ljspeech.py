# pylint: skip-file
"""FastPitch with a learned aligner at its published size, for LJSpeech (22.05 kHz, 80 mels).

    python run.py --config_file=example_configs/text2speech/fastpitch_ljspeech.py \
        --mode=train_eval

Sizes are NeMo's fastpitch_align_v1.05 (Łańcucki 2021 with Badlani et al. 2021's aligner):
384-wide symbol embeddings, 6 + 6 FFT blocks of one 64-channel attention head and a
convolutional feed-forward network of 1536 channels (kernel 3), dropout 0.1 (attention 0.1),
duration and pitch predictors of 2 x 256 channels (kernel 3, dropout 0.1), pitch embedding
kernel 3, at most 75 frames per symbol. Audio: n_fft 1024, hop 256, Slaney mel filters up to
8 kHz on the magnitude, log floor 1e-5. Pitch: librosa's pYIN (cached on the first epoch).
The learning rate rises linearly to 1e-3 over 1000 steps and then falls as 1/sqrt(step), as
NeMo's Noam schedule without model-size scaling; batches of 32; mixed precision.
``dataset_location`` holds LJSpeech's wavs/ and the CSVs (``name|raw|normalized``).
"""
import os

from open_seq2seq.data.text2speech.fastpitch import FastPitchDataLayer
from open_seq2seq.decoders import FastPitchDecoder
from open_seq2seq.encoders import FastPitchEncoder
from open_seq2seq.losses import FastPitchLoss
from open_seq2seq.models import FastPitch
from open_seq2seq.optimizers.lr_policies import transformer_policy

dataset_location = os.environ.get("LJSPEECH_DATA", "/data/speech/LJSpeech")
train_csv = os.path.join(dataset_location, "train.csv")

base_model = FastPitch

_fft = {"d_model": 384, "num_layers": 6, "num_heads": 1, "head_size": 64, "filter_size": 1536,
        "kernel_size": 3, "dropout": 0.1, "attention_dropout": 0.1}

base_params = {
    "random_seed": 0,
    "max_steps": 400000,  # about NeMo's 1000 epochs of LJSpeech at 32 clips a step
    "batch_size_per_gpu": 32,
    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 2000,
    "eval_steps": 2000,
    "save_checkpoint_steps": 5000,
    "logdir": "result/fastpitch-LJ",
    "save_to_tensorboard": True,
    "max_grad_norm": 1000.0,
    "optimizer": "AdamW",  # as NeMo
    "optimizer_params": {"beta1": 0.9, "beta2": 0.999, "weight_decay": 1e-6},
    # peak 1e-3 at step 1000: 1e-3 * sqrt(1000) * min(step / 1000 ** 1.5, step ** -0.5)
    "lr_policy": transformer_policy,
    "lr_policy_params": {"learning_rate": 1e-3 * 1000 ** 0.5, "d_model": 1,
                         "warmup_steps": 1000},
    "dtype": "mixed",
    "loss_scaling": "Backoff",
    "encoder": FastPitchEncoder,
    "encoder_params": dict(_fft),
    "decoder": FastPitchDecoder,
    "decoder_params": dict(_fft, predictor_filter_size=256, predictor_kernel_size=3,
                           predictor_dropout=0.1, predictor_layers=2,
                           pitch_embedding_kernel_size=3, aligner_channels=80,
                           aligner_temperature=0.0005, use_prior=True, max_duration=75),
    "loss": FastPitchLoss,
    "loss_params": {"mel_weight": 1.0, "duration_weight": 0.1, "pitch_weight": 0.1,
                    "forward_sum_weight": 1.0, "binarization_weight": 1.0,
                    "binarization_start_step": 10000},
    "data_layer": FastPitchDataLayer,
    "data_layer_params": {
        "vocab_file": "open_seq2seq/test_utils/vocab_tts.txt",
        "dataset_location": dataset_location,
        "dataset": "LJ",
        "num_audio_features": 80,
        "output_type": "mel",
        "sampling_rate": 22050,
        "n_fft": 1024,
        "hop_length": 256,
        "win_length": 1024,
        "mel_type": "slaney",
        "fmin": 0.0,
        "fmax": 8000.0,
        "mag_power": 1,
        "data_min": 1e-5,
        "trim": False,
        "pad_to": 1,
        "pitch_method": "pyin",
        "pitch_stats_files": [train_csv],
    },
}

train_params = {"data_layer_params": {"dataset_files": [train_csv], "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": [os.path.join(dataset_location, "val.csv")],
                                     "duration_max": None, "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": [os.path.join(dataset_location,
                                                                     "test.csv")],
                                      "duration_max": None, "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "duration_max": None,
                                                  "shuffle": False}}
