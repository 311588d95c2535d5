# A language model of the tweets' own text, labels dropped (ULMFiT's first step: read text
# like the task's), the start of example_configs/transfer/tweets-from-tweets-lm.py. The
# network is example_configs/lm/lstm-austen.py's (one fused LSTM layer of 256 units, tied
# embeddings, sampled softmax in training). Make the corpus and train:
#   bash scripts/get_lm_data.sh          # data/tweets
#   python scripts/transfer_curve.py --prepare_only
#       (data/tweets-lm/wiki.{train,valid,test}.tokens: train.csv's, val.csv's and test.csv's
#        texts tokenized and lower-cased, one tweet a line)
#   python run.py --config_file=example_configs/transfer/tweets-lm.py --mode=train_eval
# 17,826 training tweets, 380 k words: 4 epochs are about 680 steps.
import keras

from open_seq2seq.data import WKTDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import LMEncoder
from open_seq2seq.losses import BasicSampledSequenceLoss
from open_seq2seq.models import LSTMLM
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = "data/tweets-lm"
processed_data_folder = "data/tweets-lm/processed"
bptt = 35

base_model = LSTMLM

base_params = {
    "random_seed": 0,
    "num_epochs": 4,
    "batch_size_per_gpu": 64,
    "eval_batch_size_per_gpu": 64,
    "save_summaries_steps": 100,
    "print_loss_steps": 50,
    "print_samples_steps": 500,
    "eval_steps": 340,
    "save_checkpoint_steps": 340,
    "logdir": "experiments/tweets-lm",
    "processed_data_folder": processed_data_folder,

    "optimizer": "Adam",
    "optimizer_params": {},
    "lr_policy": fixed_lr,
    "lr_policy_params": {"learning_rate": 3e-3},
    "max_grad_norm": 0.25,
    "summaries": ["learning_rate", "global_gradient_norm"],
    "dtype": "float32",

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
        "num_sampled": 512,
        "num_tokens_gen": 20,
    },
    "decoder": FakeDecoder,
    "loss": BasicSampledSequenceLoss,
    "loss_params": {"average_across_timestep": True, "do_mask": False},
}

train_params = {
    "data_layer": WKTDataLayer,
    "data_layer_params": {"data_root": data_root, "bptt": bptt, "rand_start": True,
                          "shuffle": False},
}
eval_params = {
    "data_layer": WKTDataLayer,
    "data_layer_params": {"bptt": bptt},
}
infer_params = {
    "data_layer": WKTDataLayer,
    "data_layer_params": {"bptt": bptt, "seed_tokens": "i the @ so"},
}
