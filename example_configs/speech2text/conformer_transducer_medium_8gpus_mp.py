# Conformer-Transducer at the Conformer paper's M size (16 blocks of width 256, 4 heads, x4 conv
# subsampling; kernel 31 here, 32 in the paper; a one-layer LSTM prediction network of 640 and
# a joint network of 640: 31.3 M parameters) with SentencePiece targets (a transducer's
# B x T x U x V joint is why: 128 pieces make U about a quarter of the characters), on
# LibriSpeech 960 h, for 8 GPUs under Horovod in mixed precision (the joint and the RNN-T
# loss run in float32: decoder_params/joint_dtype). Batches hold up to 120 s of padded audio
# per GPU in 10 duration buckets (docs/speech-recognition.md, "Batching"); AdamW with the
# Noam schedule (peak 2.0 / sqrt(256) / sqrt(10,000) = 1.25e-3 at step 10,000), SpecAugment
# with 2 frequency masks of up to 27 bands and 10 time masks (NeMo's counts; NeMo sizes a time
# mask at 5 % of the utterance, here up to 40 frames, 0.4 s).
#
# Data (docs/speech-recognition.md, "Making data"): scripts/import_librispeech.py writes
# data/librispeech/librivox-*.csv, then the targets' model, from the train transcripts:
#   python scripts/build_sentencepiece.py --model_prefix data/librispeech/spm_unigram_128 \
#       --vocab_size 128 --model_type unigram \
#       --input_csv data/librispeech/librivox-train-clean-100.csv \
#       --input_csv data/librispeech/librivox-train-clean-360.csv \
#       --input_csv data/librispeech/librivox-train-other-500.csv
# Then:
#   mpiexec -np 8 python run.py --mode=train_eval \
#       --config_file=example_configs/speech2text/conformer_transducer_medium_8gpus_mp.py
# The paper's S (10.3 M there): --encoder_params/d_model=144 --decoder_params/pred_hidden=320
# --decoder_params/joint_hidden=320; L (118.8 M): --encoder_params/d_model=512
# --encoder_params/num_heads=8 --encoder_params/num_layers=17.
from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
from open_seq2seq.encoders.conformer_encoder import ConformerEncoder
from open_seq2seq.losses.transducer_loss import RNNTLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import transformer_policy

data_dir = "data/librispeech"

base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "use_horovod": True,
    "num_gpus": 8,
    "num_epochs": 500,
    "batch_size_per_gpu": 32,  # eval and infer; training batches by duration
    "save_summaries_steps": 100,
    "print_loss_steps": 100,
    "print_samples_steps": 5000,
    "eval_steps": 5000,
    "save_checkpoint_steps": 2500,
    "num_checkpoints": 5,
    "logdir": "experiments/conformer_transducer_medium",

    "optimizer": "AdamW",
    "optimizer_params": {"beta1": 0.9, "beta2": 0.98, "weight_decay": 1e-3},
    "lr_policy": transformer_policy,
    "lr_policy_params": {"learning_rate": 2.0, "d_model": 256, "warmup_steps": 10000},
    "max_grad_norm": 1.0,
    "dtype": "mixed",
    "loss_scaling": "Backoff",

    "encoder": ConformerEncoder,
    "encoder_params": {
        "d_model": 256,
        "num_layers": 16,
        "num_heads": 4,
        "ff_expansion_factor": 4,
        "conv_kernel_size": 31,
        "conv_norm_type": "batch_norm",
        "subsampling": "conv2d4",
        "dropout": 0.1,
        "attention_dropout": 0.1,
    },

    "decoder": TransducerDecoder,
    "decoder_params": {
        "pred_hidden": 640,
        "pred_num_layers": 1,
        "pred_dropout": 0.1,
        "joint_hidden": 640,
        "joint_activation": "relu",
        "joint_dropout": 0.1,
        "joint_dtype": "float32",
        "max_symbols_per_step": 10,
        "use_beam_search": True,
        "beam_width": 4,
    },
    "loss": RNNTLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 80,
        "input_type": "logfbank",
        "vocab_file": data_dir + "/spm_unigram_128.model",
        "norm_per_feature": True,
        "window": "hanning",
        "sample_freq": 16000,
        "pad_to": 16,
        "dither": 1e-5,
        "dataset_files": [data_dir + "/librivox-dev-clean.csv"],
        "shuffle": False,
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"n_freq_mask": 2, "width_freq_mask": 27,
                         "n_time_mask": 10, "width_time_mask": 40},
        "dataset_files": [data_dir + "/librivox-train-clean-100.csv",
                          data_dir + "/librivox-train-clean-360.csv",
                          data_dir + "/librivox-train-other-500.csv"],
        "max_duration": 16.7,
        "batching": "duration",
        "batch_duration": 120.0,  # B x T x U x V: less than CTC's 200 s
        "batch_size_multiple": 8,
        "shuffle": True,
    },
}

eval_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/librivox-dev-clean.csv"]},
}

infer_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/librivox-test-clean.csv"]},
}
