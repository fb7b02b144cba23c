"""A BERT sequence classifier that pools by the mean over real tokens, for ``transformers``.

This file is not imported by the engine: ``budgetformer export``
(:mod:`budgetformer_core.io.export`) copies it unchanged into an exported folder, whose
config.json names its class in ``auto_map``, and ``transformers`` imports it from there when
asked to (``AutoModelForSequenceClassification.from_pretrained(folder, trust_remote_code=True)``).
It needs ``torch`` and ``transformers`` alone.

Our models fine-tuned from a BERT-family encoder (all-MiniLM-L6-v2, …) classify the mean of
the last layer's token states over the real tokens, which none of ``transformers``' BERT
classifiers does (``BertForSequenceClassification`` reads the ``[CLS]`` state through its
pooler). This class is ``BertModel`` without its pooler, that masked mean, and one linear layer.

Like our fine-tuned models, it reads the first ``config.max_position_embeddings`` tokens of its
input and drops the rest (a text cut so loses its closing ``[SEP]``): ``tokenizer(text)`` gives
the prediction ``budgetformer predict`` gives, whatever the text's length. Batches are padded on
the right (the tokenizer's default).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertModel, BertPreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput


class BertMeanPoolForSequenceClassification(BertPreTrainedModel):
    """``BertModel`` (no pooler) → mean over real tokens → ``Linear(hidden_size, num_labels)``."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs):
        """Logits (B, num_labels) of input_ids (B, T); a cross-entropy loss too when ``labels`` are given."""
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        cut = self.config.max_position_embeddings  # as our models do: the first max_len tokens
        input_ids, attention_mask = input_ids[:, :cut], attention_mask[:, :cut]
        if token_type_ids is not None:
            token_type_ids = token_type_ids[:, :cut]
        outputs = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                            return_dict=True, **kwargs)
        hidden = outputs.last_hidden_state  # (B, T, D)
        real = attention_mask[..., None].to(hidden.dtype)  # (B, T, 1)
        pooled = (hidden * real).sum(1) / real.sum(1).clamp_min(1.0)  # (B, D)
        logits = self.classifier(pooled)  # (B, C)
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels.view(-1))
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=outputs.hidden_states,
                                        attentions=outputs.attentions)
