"""The iteration order of a Java 8+ ``HashMap<String, V>`` filled by ``put``, modelled exactly.

Nutch's ``TextProfileSignature`` sorts its tokens by count with a stable sort, so tokens of equal
count stay in the order its ``HashMap`` iterates them, and that order is part of the signature.
A ``HashMap`` iterates its table bucket by bucket, and each bucket along its ``next`` links:

- The table starts with 16 buckets and doubles when it holds more than three quarters of its
  size. A key's bucket is ``(h ^ (h >>> 16)) & (size - 1)``, *h* being ``String.hashCode``;
  doubling splits each bucket in two, keeping the order of its keys.
- A bucket holds a list, a new key at its end. When a ninth key is added to one (eight were
  there), Java doubles the table instead if it has fewer than 64 buckets, or else turns the
  bucket into a red-black tree ordered by hash, then by ``String.compareTo``.
- A tree bucket still iterates along ``next`` links: the list order it had, except that the
  tree's root is moved to the front whenever the tree is built or rebalanced, and a key added to
  a tree is linked right after its parent in the tree, not at the end. Doubling splits a tree in
  two lists (order kept); a half of six keys or fewer becomes a plain list again, a larger one a
  new tree (the old tree is kept as it is when the other half is empty).

:func:`java_hash_map_order` replays the ``put`` calls of distinct keys and returns that order;
this follows OpenJDK's ``HashMap`` (``putVal``, ``resize``, ``treeifyBin``, ``TreeNode``'s
``treeify``, ``putTreeVal``, ``split``, ``balanceInsertion``, ``moveRootToFront``), the same
from Java 8 to 25 for these paths. Keys are compared as Java's ``compareTo`` compares them,
UTF-16 unit by unit, which for keys without characters outside the BMP (text-profile tokens
have none) is Python's ``<``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

from nutchy.core.generate import java_string_hash

__all__ = ["java_hash_map_order"]

_TREEIFY_THRESHOLD: Final = 8
_UNTREEIFY_THRESHOLD: Final = 6
_MIN_TREEIFY_CAPACITY: Final = 64


def _spread(key: str) -> int:
    """``HashMap.hash``: the hash code with its high half folded in, as a signed int."""
    h = java_string_hash(key) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h & 0x80000000 else h


class _Node:
    __slots__ = ("hash", "key", "left", "parent", "red", "right")

    def __init__(self, key: str, hash_: int) -> None:
        self.key = key
        self.hash = hash_
        self.left: _Node | None = None
        self.right: _Node | None = None
        self.parent: _Node | None = None
        self.red = False

    def goes_left_of(self, other: _Node) -> bool:
        """Whether this key descends left of *other* (``dir <= 0``): smaller hash, or equal
        hash and a smaller key (distinct keys never compare equal)."""
        if other.hash != self.hash:
            return self.hash < other.hash
        return self.key < other.key


class _Tree:
    """A tree bucket: its nodes in ``next`` order, and the red-black tree over them."""

    def __init__(self, nodes: list[_Node]) -> None:
        self.order = nodes
        root: _Node | None = None
        for x in nodes:  # TreeNode.treeify
            x.left = x.right = None
            if root is None:
                x.parent, x.red, root = None, False, x
                continue
            root = _insert(root, root, x)
        assert root is not None
        self.root = root
        self._root_to_front()

    def put(self, x: _Node) -> None:
        """TreeNode.putTreeVal for a key not in the tree."""
        p = self.root
        while True:
            child = p.left if x.goes_left_of(p) else p.right
            if child is None:
                break
            p = child
        self.order.insert(self.order.index(p) + 1, x)  # linked after its parent
        self.root = _insert(self.root, p, x)
        self._root_to_front()

    def _root_to_front(self) -> None:
        if self.order[0] is not self.root:
            self.order.remove(self.root)
            self.order.insert(0, self.root)


def _insert(root: _Node, parent: _Node, x: _Node) -> _Node:
    """Link *x* below *parent* (descending from *parent* to a free place) and rebalance;
    return the new root."""
    p: _Node | None = parent
    while p is not None:
        xp = p
        p = p.left if x.goes_left_of(p) else p.right
    x.parent = xp
    if x.goes_left_of(xp):
        xp.left = x
    else:
        xp.right = x
    return _balance_insertion(root, x)


def _rotate(root: _Node, p: _Node, side: str) -> _Node:
    """TreeNode.rotateLeft (*side* ``"left"``: *p*'s right child takes its place) or
    rotateRight (``"right"``); return the root, which is black if it changed."""
    other = "right" if side == "left" else "left"
    r: _Node | None = getattr(p, other)
    if r is None:
        return root
    inner: _Node | None = getattr(r, side)
    setattr(p, other, inner)
    if inner is not None:
        inner.parent = p
    pp = r.parent = p.parent
    if pp is None:
        root = r
        r.red = False
    elif pp.left is p:
        pp.left = r
    else:
        pp.right = r
    setattr(r, side, p)
    p.parent = r
    return root


def _balance_insertion(root: _Node, x: _Node) -> _Node:
    """TreeNode.balanceInsertion: the red-black fix-up after inserting *x*."""
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root
        # The parent's side of the grandparent, and the uncle on the other side.
        side, other = ("left", "right") if xp is xpp.left else ("right", "left")
        uncle: _Node | None = getattr(xpp, other)
        if uncle is not None and uncle.red:
            uncle.red = xp.red = False
            xpp.red = True
            x = xpp
            continue
        if x is getattr(xp, other):
            x = xp
            root = _rotate(root, x, side)
            xp = x.parent
            xpp = None if xp is None else xp.parent
        if xp is not None:
            xp.red = False
            if xpp is not None:
                xpp.red = True
                root = _rotate(root, xpp, other)


_Bucket = list[_Node] | _Tree | None


class _HashMap:
    def __init__(self) -> None:
        self.table: list[_Bucket] = [None] * 16
        self.size = 0

    def put(self, key: str, hash_: int) -> None:
        node = _Node(key, hash_)
        table = self.table
        index = node.hash & (len(table) - 1)
        bucket = table[index]
        if bucket is None:
            table[index] = [node]
        elif isinstance(bucket, _Tree):
            bucket.put(node)
        else:
            bucket.append(node)
            if len(bucket) > _TREEIFY_THRESHOLD:  # eight were there: treeifyBin
                if len(table) < _MIN_TREEIFY_CAPACITY:
                    self._resize()
                else:
                    table[index] = _Tree(bucket)
        self.size += 1
        if self.size > len(self.table) * 3 // 4:
            self._resize()

    def _resize(self) -> None:
        old = self.table
        bit = len(old)
        table: list[_Bucket] = [None] * (2 * bit)
        for j, bucket in enumerate(old):
            if bucket is None:
                continue
            nodes = bucket.order if isinstance(bucket, _Tree) else bucket
            low = [n for n in nodes if not n.hash & bit]
            high = [n for n in nodes if n.hash & bit]
            for index, half, other in ((j, low, high), (j + bit, high, low)):
                if not half:
                    continue
                if not isinstance(bucket, _Tree) or len(half) <= _UNTREEIFY_THRESHOLD:
                    table[index] = half
                elif other:
                    table[index] = _Tree(half)
                else:
                    table[index] = bucket  # the whole tree moves as it is
        self.table = table

    def keys(self) -> list[str]:
        keys: list[str] = []
        for bucket in self.table:
            if bucket is not None:
                nodes = bucket.order if isinstance(bucket, _Tree) else bucket
                keys.extend(n.key for n in nodes)
        return keys


def java_hash_map_order(keys: Iterable[str]) -> list[str]:
    """*keys* (distinct, in the order they were put) in the order a ``HashMap`` iterates them.

    >>> java_hash_map_order(["b", "a", "c"])
    ['a', 'b', 'c']

    When no bucket ever holds nine keys, which is the usual case, the order is the buckets' of
    the final table, each in insertion order, and is computed so; otherwise every ``put`` is
    replayed.
    """
    keys = list(keys)
    hashes = [_spread(key) for key in keys]
    capacity = 16
    while True:
        # The table has `capacity` buckets from the first key on (16) or since the key that
        # passed the previous threshold, up to and with the key that passes this one.
        inserted = min(len(keys), capacity * 3 // 4 + 1)
        mask = capacity - 1
        if max(Counter(h & mask for h in hashes[:inserted]).values(), default=0) > 8:
            table = _HashMap()
            for key, hash_ in zip(keys, hashes, strict=True):
                table.put(key, hash_)
            return table.keys()
        if len(keys) <= capacity * 3 // 4:
            break
        capacity *= 2
    order = sorted(range(len(keys)), key=lambda i: (hashes[i] & mask, i))
    return [keys[i] for i in order]
