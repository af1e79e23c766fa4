"""llama.cpp's SentencePiece (SPM) tokenizer, for the llama2.c tok512 vocabulary.

Follows llama.cpp's llm_tokenizer_spm: ' ' becomes U+2581, a leading U+2581 is added to every
text fragment (add_space_prefix; libmtmd tokenizes each fragment between media on its own), the
UTF-8 characters are merged pairwise by the highest piece score (ties: leftmost first), and a
character with no piece becomes its byte tokens <0xNN>.
"""
import heapq

import gguf_io

SPACE = "\u2581"


class Tokenizer:
    def __init__(self, gguf_path):
        meta, _ = gguf_io.read(gguf_path)
        self.tokens = meta["tokenizer.ggml.tokens"][1][1]
        self.scores = meta["tokenizer.ggml.scores"][1][1]
        self.types = meta["tokenizer.ggml.token_type"][1][1]
        self.bos = meta["tokenizer.ggml.bos_token_id"][1]
        self.eos = meta["tokenizer.ggml.eos_token_id"][1]
        self.piece_to_id = {}
        for i, t in enumerate(self.tokens):
            self.piece_to_id.setdefault(t, i)
        self.byte_to_id = {}
        for i, t in enumerate(self.tokens):
            if self.types[i] == 6:  # LLAMA_TOKEN_TYPE_BYTE, "<0xNN>"
                self.byte_to_id[int(t[3:5], 16)] = i
        self._cache = {}

    def encode(self, text):
        """One text fragment, with the SPM leading space (no BOS)."""
        got = self._cache.get(text)
        if got is not None:
            return list(got)
        s = (" " + text).replace(" ", SPACE)
        syms = list(s)  # Python str: one entry per Unicode character
        n = len(syms)
        prev = list(range(-1, n - 1))
        nxt = list(range(1, n + 1))
        nxt[-1] = -1
        heap = []

        def add(left, right):
            if left == -1 or right == -1:
                return
            piece = syms[left] + syms[right]
            tid = self.piece_to_id.get(piece)
            if tid is None:
                return
            # max score first, then leftmost
            heapq.heappush(heap, (-self.scores[tid], left, right, len(piece)))

        for i in range(1, n):
            add(i - 1, i)
        while heap:
            _, left, right, size = heapq.heappop(heap)
            if not syms[left] or not syms[right] or len(syms[left]) + len(syms[right]) != size:
                continue
            syms[left] += syms[right]
            syms[right] = ""
            nxt[left] = nxt[right]
            if nxt[right] >= 0:
                prev[nxt[right]] = left
            add(prev[left], left)
            add(left, nxt[left])
        out = []
        i = 0
        while i != -1:
            tid = self.piece_to_id.get(syms[i])
            if tid is not None:
                out.append(tid)
            else:
                out.extend(self.byte_to_id[b] for b in syms[i].encode("utf-8"))
            i = nxt[i]
        self._cache[text] = tuple(out)
        return out

    def piece(self, tid):
        return self.tokens[tid]
