"""OpenSeq2Seq's import path of the classification loss (``losses.cross_entropy_loss``).

:class:`CrossEntropyLoss` lives with the other cross-entropy losses in
:mod:`open_seq2seq.losses.sequence_loss`: softmax cross entropy of one label per example —
class ids ([batch] int) or one-hot / probability rows ([batch, classes] float) — over logits
[batch, classes] (sequence logits use their last step), computed in float32 and returned as
``(sum over examples, number of examples)``. OpenSeq2Seq's version had no label smoothing,
and neither has this one.
"""

from open_seq2seq.losses.sequence_loss import CrossEntropyLoss

__all__ = ["CrossEntropyLoss"]
