"""The clip lists of Google's Speech Commands data set, and OpenSeq2Seq's.

A list file names one clip per line, either as ``label,wav_filename`` (OpenSeq2Seq's
preprocessed lists; ``label`` a class id or a class name) or as ``<word>/<clip>.wav`` (the data
set's own ``validation_list.txt`` / ``testing_list.txt``: the class is the folder). The data
set ships no training list: :data:`TRAINING_LIST`, when absent, stands for every clip in
neither held-out list. Used by
:class:`~open_seq2seq.data.speech2text.speech_commands.SpeechCommandsDataLayer`.
"""

from __future__ import annotations

import glob
import os

from open_seq2seq.errors import DataError

SILENCE = "_silence_"
UNKNOWN = "_unknown_"
TRAINING_LIST = "training_list.txt"
HELD_OUT_LISTS = ("validation_list.txt", "testing_list.txt")


def word_folders(location: str) -> list[str]:
  """The class folders of a Speech Commands root: subfolders not starting with ``_``."""
  return sorted(d for d in os.listdir(location)
                if not d.startswith(("_", ".")) and os.path.isdir(os.path.join(location, d)))


def _listed(location: str, name: str) -> set[str]:
  path = os.path.join(location, name)
  if not os.path.isfile(path):
    return set()
  with open(path, encoding="utf-8") as f:
    return {line.strip() for line in f if line.strip()}


def training_list(location: str) -> list[str]:
  """``<word>/<clip>.wav`` of every clip outside the validation and testing lists."""
  held_out = set().union(*(_listed(location, name) for name in HELD_OUT_LISTS))
  clips = []
  for word in word_folders(location):
    for path in sorted(glob.glob(os.path.join(location, word, "*.wav"))):
      name = f"{word}/{os.path.basename(path)}"
      if name not in held_out:
        clips.append(name)
  return clips


def read_list(location: str, list_name: str, labels: list[str] | None,
              num_labels: int) -> list[tuple[str, int]]:
  """``(wav path, class id)`` of one list file (see the module docstring for its formats).

  Raises:
    DataError: a missing list or clip, an empty line's neighbour, an unknown class.
  """
  path = list_name if os.path.isabs(list_name) else os.path.join(location, list_name)
  if os.path.isfile(path):
    with open(path, encoding="utf-8") as f:
      lines = [(n, line.strip()) for n, line in enumerate(f, 1)]
  elif os.path.basename(list_name) == TRAINING_LIST:
    lines = list(enumerate(training_list(location), 1))
  else:
    raise DataError(f"data_layer_params/dataset_files: {path} does not exist; give lists "
                    f"relative to dataset_location ({location})")
  index = {name: i for i, name in enumerate(labels or [])}
  items = []
  for number, line in lines:
    where = f"{path}:{number}"
    if not line or line.replace(" ", "") == "label,wav_filename":
      continue
    if "," in line:
      label, wav = (field.strip() for field in line.split(",", 1))
    else:
      wav = line
      label = wav.replace("\\", "/").split("/", 1)[0]
    if label.lstrip("-").isdigit():
      class_id = int(label)
      if not 0 <= class_id < num_labels:
        raise DataError(f"{where}: class id {class_id} is not in [0, num_labels={num_labels})")
    elif label in index:
      class_id = index[label]
    elif UNKNOWN in index and label != SILENCE:
      class_id = index[UNKNOWN]
    else:
      raise DataError(f"{where}: unknown label {label!r}; add it to data_layer_params/labels "
                      f"(or add {UNKNOWN!r} there to collect words outside the list)")
    wav_path = wav if os.path.isabs(wav) else os.path.join(location, wav)
    if not os.path.isfile(wav_path):
      raise DataError(f"{where}: audio file {wav_path} not found")
    items.append((wav_path, class_id))
  return items


def is_csv_list(location: str, list_name: str) -> bool:
  """True when the list's first data line is ``label,wav_filename`` with an integer class."""
  path = list_name if os.path.isabs(list_name) else os.path.join(location, list_name)
  if not os.path.isfile(path):
    return False
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if line and line.replace(" ", "") != "label,wav_filename":
        return "," in line and line.split(",", 1)[0].strip().lstrip("-").isdigit()
  return False
