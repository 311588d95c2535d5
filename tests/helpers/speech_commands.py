"""Tiny Speech Commands folders made at test time (tones, no synthesizer needed)."""

from __future__ import annotations

import os

import numpy as np

RATE = 16000


def tone(label: int, seconds: float = 0.6, seed: int = 0) -> np.ndarray:
  """A clip that identifies its class: a tone at ``300 * (label + 1)`` Hz, centred in
  silence, with a little noise."""
  rng = np.random.default_rng(seed)
  t = np.arange(int(seconds * RATE)) / RATE
  signal = 0.5 * np.sin(2 * np.pi * 300 * (label + 1) * t)
  pad = (RATE - len(signal)) // 2 if len(signal) < RATE else 0
  signal = np.pad(signal, (pad, pad))
  return (signal + 0.01 * rng.standard_normal(len(signal))).astype(np.float32)


def write_wav(path: str, signal: np.ndarray) -> str:
  import soundfile
  os.makedirs(os.path.dirname(path), exist_ok=True)
  soundfile.write(path, signal, RATE, subtype="PCM_16")
  return path


def write_folder(root: str, words: tuple[str, ...] = ("down", "go", "up"), per_word: int = 4,
                 validation: int = 1, testing: int = 1, noise: bool = True,
                 seconds: float = 0.6) -> str:
  """``root/<word>/<n>_nohash_0.wav`` tones, the last ``testing`` clips of each word in
  testing_list.txt and the ``validation`` before them in validation_list.txt (no training
  list: the layer derives it), plus ``_background_noise_/white.wav`` when ``noise``."""
  val, test = [], []
  for label, word in enumerate(words):
    for n in range(per_word):
      name = f"{word}/{n:04d}_nohash_0.wav"
      write_wav(os.path.join(root, name), tone(label, seconds, seed=100 * label + n))
      if n >= per_word - testing:
        test.append(name)
      elif n >= per_word - testing - validation:
        val.append(name)
  for list_name, names in (("validation_list.txt", val), ("testing_list.txt", test)):
    with open(os.path.join(root, list_name), "w", encoding="utf-8") as f:
      f.write("".join(f"{n}\n" for n in names))
  if noise:
    rng = np.random.default_rng(7)
    write_wav(os.path.join(root, "_background_noise_", "white.wav"),
              (0.3 * rng.standard_normal(3 * RATE)).astype(np.float32))
  return root


def example_config_overrides(directory: str) -> tuple[list[str], int]:
  """SpeechCommandsDataLayer configs: four clips in OpenSeq2Seq's ``label,wav_filename``
  list format (class ids 0-3, so any ``num_labels`` >= 4 fits) serve every mode, two per
  step; background noise for ``augment_data``. Only the data shrinks, never the model.

  Returns:
    The overrides, and the number of clips every mode reads.
  """
  words = ("yes", "no", "up", "down")
  write_folder(directory, words, per_word=1, validation=0, testing=0)
  with open(os.path.join(directory, "tiny.txt"), "w", encoding="utf-8") as f:
    f.write("".join(f"{label},{word}/0000_nohash_0.wav\n" for label, word in enumerate(words)))
  return ([f"--data_layer_params/dataset_location={directory}",
           "--data_layer_params/dataset_files=['tiny.txt']", "--batch_size_per_gpu=2"],
          len(words))
