# pylint: skip-file
"""A small Tacotron 2 with guided attention on real speech: the Asterisk prompts (8 kHz).

    python scripts/import_asterisk_sounds.py --output_dir=data/asterisk
    python run.py --config_file=example_configs/text2speech/tacotron-asterisk-small.py \
        --mode=train_eval

551 studio prompts by one speaker (24 minutes, CC-BY-SA-3.0, see docs/speech-synthesis.md).
At 8 kHz the STFT is 256 samples (32 ms) with a 10 ms hop and the mel filters stop at 4 kHz;
training keeps prompts up to 6 s (about 94 % of them). The model is tacotron-synthetic-small's
with wider layers: real speech has more to say per frame than espeak-ng.
"""
import copy
import os
import runpy

_small = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                     "tacotron-synthetic-small.py"))

data_root = os.environ.get("ASTERISK_DATA", "data/asterisk")

base_model = _small["base_model"]
base_params = copy.deepcopy(_small["base_params"])
base_params.update({
    "max_steps": 3000,
    "logdir": "runs/tacotron-asterisk-small",
    "eval_steps": 500,
    "save_checkpoint_steps": 500,
    "print_samples_steps": 500,
})
base_params["encoder_params"].update({
    "src_emb_size": 128,
    "conv_layers": [{"kernel_size": [5], "stride": [1], "num_channels": 128,
                     "padding": "SAME"}] * 2,
    "rnn_cell_dim": 128,
})
base_params["decoder_params"].update({
    "attention_layer_size": 128,
    "location_filters": 16,
    "decoder_cell_units": 256,
    "prenet_units": 128,
    "max_frames_per_symbol": 8.0,
})
base_params["decoder_params"]["postnet_conv_layers"][0]["num_channels"] = 128
base_params["data_layer_params"].update({
    "dataset_location": data_root,
    "sampling_rate": 8000,
    "n_fft": 256,
    "hop_length": 80,
    "fmax": 4000.0,
    "trim": True,
    "trim_top_db": 40.0,
})

train_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "train.csv")],
                                      "duration_max": 600, "shuffle": True}}
eval_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "val.csv")],
                                     "duration_max": None, "shuffle": False}}
infer_params = {"data_layer_params": {"dataset_files": [os.path.join(data_root, "test.csv")],
                                      "duration_max": None, "shuffle": False}}
interactive_infer_params = {"data_layer_params": {"dataset_files": [], "duration_max": None,
                                                  "shuffle": False}}
