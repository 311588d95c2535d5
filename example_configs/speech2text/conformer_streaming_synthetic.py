# A small streaming Conformer-Transducer sized for a CPU, on the synthetic digit corpus:
# conformer_transducer_synthetic.py with chunked limited-context attention (chunks of 4
# subsampled frames = 160 ms, each attending to itself and the 6 chunks = 960 ms before it),
# causal convolutions (subsampling and conv modules) and layer norm in the conv module, so
# it is trained as it streams. Inference (eval, infer, interactive_infer) runs the encoder
# chunk by chunk with carried caches: recordings far longer than the training utterances
# are transcribed without attending over the whole of them. --mode=export adds the
# stream_step / stream_initial_state signatures (audio chunk + state in, text + state out).
# Make the data first (about 10 s):
#   python scripts/make_synthetic_speech.py --output_dir=data/synthetic_speech
# then: python run.py --config_file=example_configs/speech2text/conformer_streaming_synthetic.py \
#         --mode=train_eval --logdir=experiments/conformer_streaming
from open_seq2seq.data.speech2text.speech2text import Speech2TextDataLayer
from open_seq2seq.decoders.transducer_decoder import TransducerDecoder
from open_seq2seq.encoders.conformer_encoder import ConformerEncoder
from open_seq2seq.losses.transducer_loss import RNNTLoss
from open_seq2seq.models.speech2text import Speech2Text
from open_seq2seq.optimizers.lr_policies import poly_decay

data_dir = "data/synthetic_speech"

base_model = Speech2Text

base_params = {
    "random_seed": 0,
    "max_steps": 600,
    "batch_size_per_gpu": 16,
    "save_summaries_steps": 50,
    "print_loss_steps": 50,
    "print_samples_steps": 200,
    "eval_steps": 200,
    "save_checkpoint_steps": 200,
    "num_checkpoints": 2,
    "logdir": "experiments/conformer_streaming",

    "optimizer": "AdamW",
    "optimizer_params": {"weight_decay": 1e-3},
    "lr_policy": poly_decay,
    "lr_policy_params": {"learning_rate": 2e-3, "power": 2.0, "min_lr": 1e-5,
                         "warmup_steps": 100},
    "max_grad_norm": 1.0,
    "dtype": "float32",

    "encoder": ConformerEncoder,
    "encoder_params": {
        "d_model": 96,
        "num_layers": 4,
        "num_heads": 4,
        "conv_kernel_size": 15,
        "subsampling": "conv2d4",
        "dropout": 0.1,
        "attention_dropout": 0.1,
        "att_context_size": [24, 3],
        "conv_causal": True,
        "conv_norm_type": "layer_norm",
    },

    "decoder": TransducerDecoder,
    "decoder_params": {
        "pred_hidden": 128,
        "pred_num_layers": 1,
        "pred_dropout": 0.1,
        "joint_hidden": 128,
        "joint_activation": "relu",
        "joint_dropout": 0.1,
        "max_symbols_per_step": 10,
        "use_beam_search": False,
        "beam_width": 4,
    },
    "loss": RNNTLoss,
    "loss_params": {},

    "data_layer": Speech2TextDataLayer,
    "data_layer_params": {
        "num_audio_features": 40,
        "input_type": "logfbank",
        "vocab_file": "open_seq2seq/test_utils/toy_speech_data/vocab.txt",
        "norm_per_feature": True,
        "window": "hanning",
        "sample_freq": 16000,
        "pad_to": 8,
        "dataset_files": [data_dir + "/train.csv"],
    },
}

train_params = {
    "data_layer_params": {
        "augmentation": {"n_freq_mask": 1, "width_freq_mask": 4},
        "max_duration": 10.0,
    },
}

eval_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/dev.csv"]},
}

infer_params = {
    "data_layer_params": {"dataset_files": [data_dir + "/test.csv"]},
}
