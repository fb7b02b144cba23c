"""Everything that crosses the disk: datasets and splits, tokenizers, the checkpoint folder
format, pretrained encoders and Hugging Face classifier folders, files of texts to classify.

``loader.load_checkpoint`` is the one way to open a model folder: it picks ours (trained from
scratch or on a pretrained base) or a Hugging Face sequence classifier.
"""
