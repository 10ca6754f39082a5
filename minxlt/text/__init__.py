"""Text into token ids: XLM-R's and BERT's tokenizers (tokenizer.py), and training texts tokenized
once into memory-mapped arrays that later runs and every process share (token_cache.py)."""
