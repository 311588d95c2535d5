"""Reserved ids of the subword vocabularies of OpenSeq2Seq's TFRecord translation data.

OpenSeq2Seq's big-Transformer configs (WMT data prepared as TFRecords with a subword
vocabulary whose first two entries are reserved) import their special ids from here:
``"EOS_ID": EOS_ID``, ``"PAD_SYMBOL": PAD_ID``. The values are part of that data format
(padding 0, end of sentence 1) and differ from :class:`~open_seq2seq.data.text2text.vocab.
SpecialTextTokens`, the ids of the plain-text vocabularies of ``ParallelTextDataLayer``
(padding 0, unknown 1, start 2, end 3).
"""

PAD = "<pad>"
PAD_ID = 0
EOS = "<EOS>"
EOS_ID = 1
#: Tokens at the head of every such vocabulary, in id order.
RESERVED_TOKENS = [PAD, EOS]

__all__ = ["PAD", "PAD_ID", "EOS", "EOS_ID", "RESERVED_TOKENS"]
