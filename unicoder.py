"""Unicoder's pre-training tasks (Huang et al. 2019, Sec. 3.2) as continued pre-training of a
pretrained encoder on parallel sentences, whose OUT/best is --model of another method. The authors
never released the three cross-lingual tasks: this is a reading of the paper, its open choices stated.

The five tasks, one per step in turn ("in each step, we iteratively train these five tasks"):

  mlm            masked LM on single sentences of the parallel text (the paper uses Wikipedia)
  tlm            translation LM (XLM): a sentence and its translation as one masked sequence
  word_recovery  cross-lingual word recovery (Eq. 1-2): every token of X is replaced by an
                 attention mixture of Y's word embeddings, and the encoder recovers all of X
  paraphrase     cross-lingual paraphrase classification: (X, Y) pairs from <s>, translations
                 against hard negatives, 1:1
  xlm            cross-lingual masked LM on documents whose even-indexed sentences are replaced
                 by their translations, truncated to --max-length tokens (the paper: 256)

The paper's lengths, 256 tokens for documents and 128 + 128 for sentence pairs: --max-length 256
(each sentence is encoded to at most half of --max-length, so that a pair fits it).

Shapes: B rows, T tokens, H hidden, V vocabulary.
"""
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import data
from methods import Method, check_translations, flag
from minxlt.tasks import read_parallel_lines
from minxlt.errors import InputError
from model import ClassificationHead

TASKS = ("mlm", "tlm", "word_recovery", "paraphrase", "xlm")
DOCUMENT_SENTENCES = 16  # consecutive pairs a document may take, before truncation


@dataclass
class Pair:
    """A sentence and its translation as token ids with specials; `negative`, in the translation's language,
    resembles `source` but does not translate it; `document`: the cross-lingual document it starts."""
    id: str
    lang: str
    source: list
    target: list
    negative: list | None = None
    document: list | None = None

    def __len__(self):
        """Its tokens, both sides', for batches of similar length."""
        return len(self.source) + len(self.target)


def parallel_pairs(task, split, tokenizer, max_length, extra=()):
    """Every (source, translation) of a split by language in id order, plus `extra` (target, source) Examples;
    each sentence at most max_length / 2 tokens, each pair with the document it starts."""
    by_lang = {}
    sources = {e.id: e for e in getattr(task, split)[task.source]}
    order = lambda e: (0, int(e.id), "") if e.id.isdigit() else (1, 0, e.id)  # numeric ids (SIB-200's, line numbers)
    for lang in task.targets:
        rows = sorted((e for e in getattr(task, split)[lang] if e.id in sources), key=order)
        by_lang[lang] = [(sources[e.id], e) for e in rows]
    for target, source in extra:
        by_lang.setdefault(f"{target.lang}:extra", []).append((source, target))
    pairs = []
    for lang, rows in by_lang.items():
        texts = [t for s, e in rows for t in (s, e)]
        ids = tokenizer.encode_batch([t.text for t in texts], max_length=max_length // 2)
        blank = [t for t, row in zip(texts, ids) if len(row) <= 2]  # <s></s>: characters the tokenizer drops alone
        if blank:
            where = blank[0].where or f"{blank[0].lang} id {blank[0].id}"
            raise InputError(f"{where}: {blank[0].text!r} has no token but the special ones; Unicoder's tasks need "
                             "words on both sides: remove the line from both files")
        mine = [Pair(f"{lang}:{s.id}", e.lang, ids[2 * i], ids[2 * i + 1]) for i, (s, e) in enumerate(rows)]
        for i, pair in enumerate(mine):
            pair.document = document(mine[i:i + DOCUMENT_SENTENCES], max_length, tokenizer.bos_id, tokenizer.eos_id)
        pairs += mine
    return pairs


@torch.no_grad()
def mean_word_embeddings(encoder, rows):
    """(N, H): each row's mean content-token word embedding (a DAN, Iyyer et al. 2015, without trained layers)."""
    weight = encoder.embeddings.word.weight
    return torch.stack([weight[torch.tensor(row[1:-1] or row, device=weight.device)].mean(0) for row in rows]).cpu()


@torch.no_grad()
def mine_hard_negatives(pairs, sentence_vectors):
    """The paraphrase task's negatives (the paper's DAN: here `sentence_vectors`, mean_word_embeddings): each
    source's most similar translation (cosine) of its language pair, neither its own nor a copy of it."""
    by_group = {}
    for pair in pairs:
        by_group.setdefault(pair.id.rpartition(":")[0], []).append(pair)
    for group in by_group.values():  # a pair alone in its group is its own only candidate: no negative
        x = F.normalize(sentence_vectors([p.source for p in group]).float(), dim=-1)
        y = F.normalize(sentence_vectors([p.target for p in group]).float(), dim=-1)
        similarity = x @ y.T
        translation = {}  # each distinct translation's number: its own, and copies of it, are never negatives
        number = torch.tensor([translation.setdefault(tuple(p.target), len(translation)) for p in group])
        similarity[number[:, None] == number[None, :]] = float("-inf")
        for i, j in enumerate(similarity.argmax(1).tolist()):
            group[i].negative = None if torch.isinf(similarity[i, j]) else group[j].target
    return pairs


def content_tokens(ids, mask, tokenizer):
    """(B, T) True where a padded batch holds a sentence's own tokens: not <s>, </s> or padding."""
    return (mask == 1) & (ids != tokenizer.bos_id) & (ids != tokenizer.eos_id)


def mask_tokens(rows, tokenizer, generator, rate=0.15):
    """BERT's masking, as XLM uses it: content tokens chosen at `rate` (one at least per row), 80% <mask>, 10%
    random, 10% kept: (input_ids, attention_mask, labels), the chosen tokens' ids, -100 elsewhere."""
    ids, mask = tokenizer.pad(rows)
    content = content_tokens(ids, mask, tokenizer)
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & content
    for b in range(len(rows)):  # every row gets a loss: a row with nothing chosen takes one token
        if not chosen[b].any() and content[b].any():
            positions = content[b].nonzero().flatten()
            chosen[b, positions[torch.randint(len(positions), (1,), generator=generator)]] = True
    labels = torch.where(chosen, ids, -100)
    draw = torch.rand(ids.shape, generator=generator)
    inputs = ids.clone()
    inputs[chosen & (draw < 0.8)] = tokenizer.mask_id
    random_tokens = torch.randint(*tokenizer.content_ids(), ids.shape, generator=generator)  # no special token
    swap = chosen & (draw >= 0.8) & (draw < 0.9)
    inputs[swap] = random_tokens[swap]
    return inputs, mask, labels


def masked_positions(labels, static=False, share=0.25):
    """Indices into the B * T tokens where `labels` are not -100, and those labels (the LM head runs there);
    `static` (a compiled step): `share` of the tokens, rounded up to 16, the rest position 0 with -100."""
    positions = (labels.flatten() != -100).nonzero().flatten()
    if static:
        count = min(labels.numel(), -(-int(share * labels.numel()) // 16) * 16)  # BERT's 15% rarely nears 25%
        positions = torch.cat([positions[:count], positions.new_full((max(0, count - len(positions)),), -1)])
    return positions.clamp(min=0), torch.where(positions >= 0, labels.flatten()[positions.clamp(min=0)], -100)


def document(pairs, length, bos=0, eos=2):
    """A cross-lingual document: consecutive pairs' sentences (no boundaries here: a run in corpus order), the
    2nd, 4th, ... replaced by their translations, as one <s> ... </s> of at most `length` tokens."""
    content = []
    for index, p in enumerate(pairs, start=1):
        content += (p.target if index % 2 == 0 else p.source)[1:-1]
        if len(content) >= length - 2:
            break
    return [bos, *content[:length - 2], eos]


def make_batch(task, pairs, weights, generator, tokenizer):
    """The tensors of one micro-batch of `task`; rows of weight 0 (DDP padding) get no labels. Word recovery's X
    is either side (both directions learn); a paraphrase pair gives one positive and one negative."""
    keep = torch.tensor(weights) > 0
    batch, static = {"task": task}, tokenizer.pad_multiple > 1  # buckets: fixed rows and scored positions too
    if task in ("mlm", "tlm", "xlm"):
        if task == "mlm":  # one side of each pair, as a monolingual sentence
            rows = [p.source if torch.rand((), generator=generator) < 0.5 else p.target for p in pairs]
        elif task == "tlm":
            rows = [tokenizer.add_special_tokens(p.source[1:-1], p.target[1:-1]) for p in pairs]
        else:
            rows = [p.document for p in pairs]
        batch["input_ids"], batch["attention_mask"], batch["labels"] = mask_tokens(rows, tokenizer, generator)
        batch["labels"][~keep] = -100
        batch["masked"], batch["masked_labels"] = masked_positions(batch["labels"], static)
    elif task == "word_recovery":  # X: the source or the translation, with equal chance
        flip = [bool(torch.rand((), generator=generator) < 0.5) for _ in pairs]
        xs = [p.target if f else p.source for p, f in zip(pairs, flip)]
        ys = [p.source if f else p.target for p, f in zip(pairs, flip)]
        if static:  # X and Y of one length: one shape per bucket
            batch["x_ids"], batch["x_mask"], batch["y_ids"], batch["y_mask"] = data.pad_pairs(tokenizer, xs, ys)
        else:
            batch["x_ids"], batch["x_mask"] = tokenizer.pad(xs)
            batch["y_ids"], batch["y_mask"] = tokenizer.pad(ys)
        batch["x_content"] = content_tokens(batch["x_ids"], batch["x_mask"], tokenizer)
        batch["y_content"] = content_tokens(batch["y_ids"], batch["y_mask"], tokenizer)
        batch["labels"] = torch.where(batch["x_content"] & keep[:, None], batch["x_ids"], -100)  # all of X at once
        batch["masked"], batch["masked_labels"] = masked_positions(batch["labels"], static, share=1.0)
    elif task == "paraphrase":
        rows, labels = [], []
        for i, p in enumerate(pairs):
            # else another translation into its language (another language's would be told apart by it alone);
            # without one, the positive only
            negative = p.negative or next((q.target for q in pairs if q.lang == p.lang and q.target != p.target), None)
            rows.append(tokenizer.add_special_tokens(p.source[1:-1], p.target[1:-1]))
            labels.append(1 if keep[i] else -100)
            if negative is not None:
                rows.append(tokenizer.add_special_tokens(p.source[1:-1], negative[1:-1]))
                labels.append(0 if keep[i] else -100)
            elif static:  # two rows a pair whatever the draws: the positive again, not scored
                rows.append(rows[-1])
                labels.append(-100)
        batch["input_ids"], batch["attention_mask"] = tokenizer.pad(rows)
        batch["labels"] = torch.tensor(labels)
    return batch


class Unicoder(nn.Module):
    """The encoder with its masked-LM head (tied to the word embeddings), W of Eq. 2 and a paraphrase classifier
    over <s>; forward(batch) is the batch's task loss. Saved as a checkpoint directory (with the LM head)."""
    unused_parameters = True  # a step trains one task, the other heads without gradient (DDP must know)

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        encoder.add_lm_head()
        H = encoder.config.hidden_size
        self.recovery = nn.Linear(3 * H, 1, bias=False)  # W in R^{3 x h}: A_ij = W [x_i; y_j; x_i * y_j]
        nn.init.normal_(self.recovery.weight, std=0.02)
        self.paraphrase = ClassificationHead(H, 2, dropout=encoder.config.dropout)

    def attention_scores(self, x, y):
        """Eq. 2 for every (i, j), (B, Tx, H) and (B, Ty, H) -> A (B, Tx, Ty): W [x; y; x * y] = w1.x + w2.y +
        (w3 * x).y, without building the (B, Tx, Ty, 3H) concatenation."""
        w1, w2, w3 = self.recovery.weight.view(3, -1)
        return (x @ w1)[:, :, None] + (y @ w2)[:, None, :] + (x * w3) @ y.transpose(1, 2)

    def recovered_inputs(self, x_ids, x_content, y_ids, y_content):
        """Eq. 1: x_i^t = sum_j softmax_j(A_ij) y_j^t over Y's content tokens, for X's content tokens (B, Tx, H);
        X's <s>, </s> and padding keep their own."""
        embed = self.encoder.embeddings.word
        x, y = embed(x_ids), embed(y_ids)
        scores = self.attention_scores(x, y).masked_fill(~y_content[:, None, :], float("-inf"))
        mixed = scores.softmax(-1) @ y                                 # (B, Tx, H)
        return torch.where(x_content[..., None], mixed, x)

    def forward(self, batch):
        """The batch's task loss (Sec. 3.2): masked tokens' cross-entropy (word recovery: Eq. 1-2), or paraphrase's;
        a mean over the rows or tokens scored (-100: not scored)."""
        task = batch["task"]
        if task == "word_recovery":
            words = self.recovered_inputs(batch["x_ids"], batch["x_content"], batch["y_ids"], batch["y_content"])
            hidden = self.encoder(batch["x_ids"], batch["x_mask"], words=words)
        else:
            hidden = self.encoder(batch["input_ids"], batch["attention_mask"])
        if task == "paraphrase":
            logits, labels = self.paraphrase(hidden), batch["labels"]  # (B, 2) from <s>
        else:  # the LM head at the masked positions only (V is 250k for XLM-R): `masked` indexes the B * T tokens
            logits = self.encoder.mlm_logits(hidden.flatten(0, 1)[batch["masked"]])  # (n, V)
            labels = batch["masked_labels"]
        return F.cross_entropy(logits.float(), labels, reduction="sum") / (labels != -100).sum().clamp(min=1)

    def save(self, directory, tokenizer, info, whole=None, write=True):
        """A checkpoint directory for --model, plus unicoder.json (sharded: every process calls this, one writes)."""
        self.encoder.save_pretrained(directory, whole=whole, write=write)
        if not write:
            return
        tokenizer.save_pretrained(directory)
        (Path(directory) / "unicoder.json").write_text(json.dumps(info, indent=2) + "\n")


@torch.no_grad()
def masked_accuracy(model, pairs, tokenizer, batch_size, device, seed=0, limit=512):
    """Model selection: the LM head's masked-token accuracy on translation-LM inputs of at most `limit` held-out
    pairs, the sample and the masks fixed by `seed` (every evaluation sees the same)."""
    model.eval()
    pairs = random.Random(seed).sample(pairs, min(limit, len(pairs)))
    generator = torch.Generator().manual_seed(seed)
    right = total = 0
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start:start + batch_size]
        batch = make_batch("tlm", chunk, [1.0] * len(chunk), generator, tokenizer)
        hidden = model.encoder(batch["input_ids"].to(device), batch["attention_mask"].to(device))
        chosen = batch["labels"].to(device) != -100
        predicted = model.encoder.mlm_logits(hidden[chosen]).argmax(-1)
        right += (predicted == batch["labels"].to(device)[chosen]).sum().item()
        total += chosen.sum().item()
    model.train()
    return right / max(total, 1)


def read_parallel_files(specs):
    """--parallel XX_FILE,EN_FILE, line-aligned: (target, source) Example pairs, the language XX_FILE's suffix."""
    out = []
    for spec in specs or ():
        paths = spec.split(",")
        if len(paths) != 2:
            raise InputError(f"--parallel {spec}: give two line-aligned files, TARGET,SOURCE (e.g. "
                             "corpus.de,corpus.en)")
        target_path, source_path = (Path(p) for p in paths)
        sources, targets = read_parallel_lines(source_path, target_path, source_path.suffix[1:], target_path.suffix[1:])
        out += list(zip(targets, sources))
    return out


class UnicoderMethod(Method):
    """Unicoder's five pre-training tasks on the task's parallel text (and --parallel files), a task a step; OUT/best,
    selected on masked-token accuracy of dev pairs, is an encoder for --model of any other method."""
    draws = "parallel"

    @dataclass
    class Settings:
        parallel: list = flag(None, "more line-aligned parallel text, XX_FILE,EN_FILE (e.g. corpus.de,corpus.en); "
                                    "repeatable", "append")
        group_by_length: bool = False  # a pair without a mined negative takes another row of its batch: random rows

    def __init__(self, settings, run):
        super().__init__(settings, run)
        if not run.task.parallel:
            raise InputError(f"--method unicoder pairs the task's texts with their translations by id (its training "
                             f"and held-out pairs), and --task {settings.task}'s languages are not parallel: use a "
                             f"parallel task")

    def training_items(self):
        run, settings = self.run, self.settings
        if not settings.parallel:
            check_translations(run, settings, cached=False)  # its pairs are encoded here, not token-cached
        self.dev_pairs = parallel_pairs(run.task, "dev", run.tokenizer, settings.max_length)
        extra = read_parallel_files(settings.parallel)
        return parallel_pairs(run.task, "train", run.tokenizer, settings.max_length, extra)

    def build(self, encoder):
        """The encoder with its LM head, W of Eq. 2 and a paraphrase classifier."""
        if encoder.pooler is not None:
            encoder.pooler.requires_grad_(False)
        return Unicoder(encoder)

    def start(self, model, items):
        """Hard negatives from the pretrained embeddings, before any update (a resumed run finds the same)."""
        with self.run.evaluated(model) as evaluated:  # a sharded model's embeddings, whole meanwhile (in float32)
            mine_hard_negatives(items, lambda rows: mean_word_embeddings(evaluated.encoder, rows))

    def make_batch(self, items, weights, step):
        """One of the five tasks per step, in turn; the draws follow from the seed, the step and the rows."""
        seed = random.Random(f"{self.settings.seed}/{step}/{items[0].id}").getrandbits(62)
        generator = torch.Generator().manual_seed(seed)
        return make_batch(TASKS[step % len(TASKS)], items, weights, generator, self.run.tokenizer)

    def loss(self, model, batch):
        """The step's task loss (Unicoder.forward), logged under the task's name."""
        loss = model(batch)
        return loss, {batch["task"]: loss.detach()}

    def evaluate(self, model, split, langs=None, test_input=None, translations=None, predictions=None):
        """An encoder, not a classifier: on dev, masked-token accuracy of held-out pairs; no test scores."""
        run = self.run
        if split != "dev":
            return {}
        accuracy = masked_accuracy(model, self.dev_pairs, run.tokenizer, run.batch_size, run.device)
        return {run.task.source: {"masked_accuracy": accuracy}}
