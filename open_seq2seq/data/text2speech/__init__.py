"""Speech synthesis data: text cleaning and encoding (characters and ARPAbet phonemes)."""
