# Sentiment of tweets (negative / positive; 17,826 training tweets, 69.8 % of the test tweets
# negative) by an LSTM classifier that starts from a language model of the tweets' own text
# (example_configs/transfer/tweets-lm.py; load_model takes its embedding and LSTM by name and
# shape, the class layer starts fresh). With 300 labelled tweets it beats the same network
# from scratch by 2.8 points (3 seeds); at 100 and 1000 it does not (docs/language-model.md,
# section 4). Train the language model first, then e.g.
#   python run.py --config_file=example_configs/transfer/tweets-from-tweets-lm.py --mode=train \
#       --data_layer_params/train_examples=300 --logdir=experiments/tweets-300-transfer
#   python run.py --config_file=example_configs/transfer/tweets-from-tweets-lm.py --mode=infer \
#       --logdir=experiments/tweets-300-transfer --infer_output_file=predictions.csv
# --load_model=None trains the same network from scratch; scripts/transfer_curve.py runs the
# whole curve (100 ... all labels, several seeds).
import keras

from open_seq2seq.data import SSTDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import LMEncoder
from open_seq2seq.losses import CrossEntropyLoss
from open_seq2seq.models import LSTMLM
from open_seq2seq.optimizers.lr_policies import fixed_lr

base_model = LSTMLM

base_params = {
    "random_seed": 0,
    "max_steps": 300,
    "batch_size_per_gpu": 32,
    "eval_batch_size_per_gpu": 256,
    "save_summaries_steps": 50,
    "print_loss_steps": 50,
    "print_samples_steps": 300,
    "eval_steps": 300,
    "save_checkpoint_steps": 300,
    "logdir": "experiments/tweets-from-tweets-lm",
    "load_model": "experiments/tweets-lm",
    "lm_vocab_file": "data/tweets-lm/processed/vocab.txt",
    "processed_data_folder": "data/tweets/processed-tweets-lm",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 1e-3},
    "max_grad_norm": 1.0,
    "summaries": ["learning_rate", "global_gradient_norm"],
    "dtype": "float32",

    # the language model's network (tweets-lm.py), ending in 2 classes
    "encoder": LMEncoder,
    "encoder_params": {
        "initializer": keras.initializers.RandomUniform,
        "initializer_params": {"minval": -0.1, "maxval": 0.1},
        "use_cudnn_rnn": True,
        "cudnn_rnn_type": keras.layers.LSTM,
        "encoder_layers": 1,
        "emb_size": 256,
        "encoder_last_output_keep_prob": 0.8,
        "encoder_emb_keep_prob": 0.9,
        "weight_tied": True,
    },
    "decoder": FakeDecoder,
    "loss": CrossEntropyLoss,
}

train_params = {
    "data_layer": SSTDataLayer,
    "data_layer_params": {"data_root": "data/tweets", "max_length": 64},
}
eval_params = {
    "data_layer": SSTDataLayer,
    "data_layer_params": {"max_length": 64},
}
infer_params = {
    "data_layer": SSTDataLayer,
    "data_layer_params": {"max_length": 64},
}
