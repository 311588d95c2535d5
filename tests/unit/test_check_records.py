"""Records damaged inside (a broken JPEG header with every marker in place, a failed TFRecord
checksum): training stops with one line (errors.damaged_data) pointing to
scripts/check_records.py, which names each damaged record."""

import numpy as np
import pytest
import tensorflow as tf

from open_seq2seq.errors import DataError, damaged_data
from tests.helpers import image
from tests.helpers.speech import load_script
from tests.unit.test_image_data_layers import imagenet

check_records = load_script("check_records")


def _broken_header(jpeg: bytes) -> bytes:
  """The JPEG with a frame height of 0: it starts and ends as a whole JPEG does (the data
  layer's cheap check passes), and the decoder refuses it."""
  frame = jpeg.index(b"\xff\xc0")  # SOF0: marker, length (2), precision (1), height (2) ...
  return jpeg[:frame + 5] + b"\x00\x00" + jpeg[frame + 7:]


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
  directory = tmp_path_factory.mktemp("damaged")
  whole = image.encode_jpeg(np.full((30, 40, 3), 90, np.uint8))
  jpeg_file = directory / "validation-00000-of-00002"
  with tf.io.TFRecordWriter(str(jpeg_file)) as writer:
    for jpeg in (whole, _broken_header(whole), whole):
      writer.write(image.imagenet_example(jpeg, 1))
  crc_file = directory / "validation-00001-of-00002"
  with tf.io.TFRecordWriter(str(crc_file)) as writer:
    for _ in range(3):
      writer.write(image.imagenet_example(whole, 2))
  data = bytearray(crc_file.read_bytes())
  record = len(data) // 3
  data[record + 30] ^= 0xFF  # inside the second record's data: its checksum fails
  crc_file.write_bytes(bytes(data))
  return directory, jpeg_file, crc_file


def test_the_script_names_each_damaged_record(damaged, capsys):
  directory, jpeg_file, crc_file = damaged
  assert check_records.main([str(directory)]) == check_records.EXIT_DAMAGED
  lines = capsys.readouterr().out.splitlines()
  assert lines[0].startswith(f"{jpeg_file}:1: image/encoded does not decode (")
  assert lines[1].startswith(f"{crc_file}:1: fails its checksum")
  assert lines[2] == "checked 4 records in 2 files: 2 damaged"


def test_the_script_passes_whole_files_and_refuses_missing_ones(tmp_path, capsys):
  paths = image.write_imagenet(str(tmp_path), "train", num_files=1, per_file=3)
  assert check_records.main(paths) == 0
  assert capsys.readouterr().out.strip() == "checked 3 records in 1 file: 0 damaged"
  assert check_records.main([str(tmp_path / "nothing")]) == check_records.EXIT_USER_ERROR


@pytest.mark.parametrize("which,what", [
    ("jpeg", "an image of the data does not decode (TensorFlow: jpeg::Uncompress failed"),
    ("crc", "a TFRecord file of the data fails its checksum (TensorFlow: corrupted record at"),
])
def test_the_pipeline_stops_with_one_line_pointing_to_the_script(damaged, which, what):
  directory, jpeg_file, crc_file = damaged
  pattern = (jpeg_file if which == "jpeg" else crc_file).name
  layer = imagenet(str(directory), "eval", batch_size=1, file_pattern=pattern)
  with pytest.raises(Exception) as raised:
    for _ in layer.build_dataset():
      pass
  error = damaged_data(raised.value)
  assert isinstance(error, DataError), raised.value
  assert str(error).startswith(what) and "\n" not in str(error)
  assert "python scripts/check_records.py <data_dir>" in str(error)
  assert "function_node" not in str(error) and "[Op:" not in str(error)
