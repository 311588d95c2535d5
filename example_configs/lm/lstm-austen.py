# A CPU-sized LSTM language model on ten public-domain novels (six by Jane Austen; 1.14 M
# training words, 11,624-word vocabulary): validation perplexity about 170 after 300 steps
# (two minutes on 2 cores), against 468 for an add-one unigram model. Make the data first
# (Debian's r-cran-janeaustenr and r-cran-tidytext, read without R):
#   bash scripts/get_lm_data.sh
# then: python run.py --config_file=example_configs/lm/lstm-austen.py --mode=train_eval
#       python run.py --config_file=example_configs/lm/lstm-austen.py --mode=interactive_infer
# Choices that make it fast on a CPU: one fused LSTM layer of emb_size units (OpenSeq2Seq's
# use_cudnn_rnn: cuDNN on a GPU), tied input/output embeddings, a sampled softmax over 512
# words in training (full softmax in eval), and the stream layout (shuffle False): every
# batch continues the previous one and the LSTM state is carried across (truncated BPTT).
import keras

from open_seq2seq.data import WKTDataLayer
from open_seq2seq.decoders import FakeDecoder
from open_seq2seq.encoders import LMEncoder
from open_seq2seq.losses import BasicSampledSequenceLoss
from open_seq2seq.models import LSTMLM
from open_seq2seq.optimizers.lr_policies import fixed_lr

data_root = "data/austen"
processed_data_folder = "data/austen/processed"
bptt = 35

base_model = LSTMLM

base_params = {
    "random_seed": 0,
    "num_epochs": 2,
    "batch_size_per_gpu": 64,
    "eval_batch_size_per_gpu": 64,
    "save_summaries_steps": 100,
    "print_loss_steps": 50,
    "print_samples_steps": 500,
    "eval_steps": 500,
    "save_checkpoint_steps": 500,
    "logdir": "experiments/lstm-austen",
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
        "num_tokens_gen": 30,
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
    "data_layer_params": {"bptt": bptt, "seed_tokens": "Elizabeth She It The"},
}
