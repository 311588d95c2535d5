# A small joint CTC-attention model (pyramidal BiLSTM listener, location-aware speller) that
# learns the synthetic digit corpus on a CPU. Make the data first (about 20 s):
#   python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech
# then: python run.py --config_file=example_configs/speech2text/jca_toy_synthetic.py \
#         --mode=train_eval --logdir=experiments/jca_toy
# Transcripts come from the attention decoder (greedy in eval; beam_width in infer).
import tensorflow as tf

from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.fc_decoders import FullyConnectedCTCDecoder
from open_seq2seq.decoders.jca_decoder import JointCTCAttentionDecoder
from open_seq2seq.decoders.las_decoder import ListenAttendSpellDecoder
from open_seq2seq.encoders.las_encoder import ListenAttendSpellEncoder
from open_seq2seq.losses.jca_loss import MultiTaskCTCEntropyLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay

data_dir = "data/synthetic_speech"

base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "max_steps": 300,
    "batch_size_per_gpu": 16,
    "save_summaries_steps": 50,
    "print_loss_steps": 25,
    "print_samples_steps": 100,
    "eval_steps": 100,
    "save_checkpoint_steps": 100,
    "num_checkpoints": 2,
    "logdir": "experiments/jca_toy",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 3e-3, "power": 2.0, "min_lr": 1e-5,
                         "warmup_steps": 20},
    "max_grad_norm": 1.0,
    "dtype": "float32",

    "encoder": ListenAttendSpellEncoder,
    "encoder_params": {
        "convnet_layers": [
            {"type": "conv1d", "repeat": 1, "kernel_size": [7], "stride": [2],
             "num_channels": 64, "padding": "SAME"},
        ],
        "recurrent_layers": [
            {"type": "lstm", "num_layers": 1, "hidden_dim": 64,
             "pool": True, "pool_size": [2], "stride": [2]},
        ],
        "dropout_keep_prob": 0.9,
        "normalization": "batch_norm",
        "activation_fn": tf.nn.relu,
    },

    "decoder": JointCTCAttentionDecoder,
    "decoder_params": {
        "attn_decoder": ListenAttendSpellDecoder,
        "attn_decoder_params": {
            "tgt_emb_size": 32,
            "pos_embedding": False,
            "attention_params": {
                "attention_dim": 64,
                "attention_type": "chorowski",
                "use_coverage": True,
                "num_heads": 1,
            },
            "rnn_type": "lstm",
            "hidden_dim": 128,
            "num_layers": 1,
            "dropout_keep_prob": 0.9,
        },
        "ctc_decoder": FullyConnectedCTCDecoder,
        "ctc_decoder_params": {},
        "beam_search_params": {"beam_width": 4},
        "language_model_params": {"use_language_model": False},
    },

    "loss": MultiTaskCTCEntropyLoss,
    "loss_params": {
        "seq_loss_params": {"offset_target_by_one": False, "average_across_timestep": True,
                            "do_mask": True},
        "ctc_loss_params": {},
        "lambda_value": 0.25,
    },

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 40,
        "input_type": "logfbank",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "norm_per_feature": True,
        "autoregressive": True,
        "dataset_files": [data_dir + "/train.csv"],
    },
}

train_params = {
    "data_layer_params": {"max_duration": 10.0},
}

eval_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/dev.csv"]},
}

infer_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/test.csv"]},
}
