"""scripts/benchmark_matmul_floor.py: the products of a Transformer step and their table."""

import re

import pytest

from tests.helpers.speech import load_script


@pytest.fixture(scope="module")
def floor():
  return load_script("benchmark_matmul_floor")


def test_products_are_the_layers_forward_and_both_gradients(floor):
  forward = floor.step_matmuls(src=10, tgt=20, d_model=8, ffn=32, enc_layers=1, dec_layers=1,
                               vocab=50)
  assert len(forward) == 4 + 7 + 1 and forward[-1] == (20, 8, 50)
  assert (10, 8, 16) in forward  # the decoder's keys and values of the encoder's output
  # multiply-adds of one position: 3 d^2 + d^2 + 2 d f for an encoder layer
  assert sum(m * k * n for m, k, n in forward[:4]) == 10 * (4 * 8 * 8 + 2 * 8 * 32)
  both = floor.with_backward(forward)
  assert len(both) == 3 * len(forward)
  assert floor.flops(both) == 3 * floor.flops(forward) == 3 * 2 * sum(
      m * k * n for m, k, n in forward)
  assert len(floor.step_matmuls(10, 20, 8, 32, 2, 3, 50)) == 2 * 4 + 3 * 7 + 1


def test_prints_the_floor_and_the_step_ratio(floor, capsys):
  assert floor.main(["--src_positions", "16", "--tgt_positions", "12", "--d_model", "8",
                     "--ffn", "16", "--vocab", "20", "--repeats", "2", "--step_time", "5"]) == 0
  row = capsys.readouterr().out.strip().splitlines()[-1]
  match = re.fullmatch(r"\| 69 \| 0 \| ([\d.]+) \| \d+ \| 5\.000 \| ([\d.]+) \|", row)
  assert match, row
  assert float(match.group(1)) > 0 and float(match.group(2)) > 1
  with pytest.raises(SystemExit):
    floor.main(["--vocab", "0"])
