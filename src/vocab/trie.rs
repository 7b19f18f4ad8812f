//! The token trie: every text token's bytes in one prefix tree, laid out in depth-first order.
//!
//! A mask computation walks the trie once instead of testing each token separately: a token
//! sharing a prefix with its neighbours re-uses the state reached on that prefix, and the first
//! rejected byte skips the whole subtree below it (`subtree_end`), which is what makes a walk over
//! a 150k-token vocabulary cheap (the llguidance paper, §"token trie").

use crate::base::sorted::walk_sorted;
use crate::base::token::TokenId;

/// One node: the byte leading into it from its parent, where its subtree ends, and where its
/// tokens start and its subtree's end in `tokens` (the node's own ones, several ids with the
/// same bytes, end where the next node's start). The subtree's token end is kept here rather
/// than read from the node at `subtree_end`, far away in memory: a walk collecting the tokens
/// of the subtrees it rejects (uncertain tokens) reads it at each of them. `deepest` is the
/// byte length of the subtree's longest token (saturated), in what was the struct's padding.
#[derive(Clone, Copy, Debug)]
struct Node {
    tokens_start: u32,
    tokens_end: u32,
    subtree_end: u32,
    depth: u16,
    byte: u8,
    deepest: u8,
}

/// Prefix tree of the text tokens' bytes, in DFS order.
///
/// Node 0 is the root (the empty prefix). Because nodes are in DFS order, the tokens of a subtree
/// form one contiguous slice ([`Subtree::tokens`]), so a walk can accept or classify a
/// whole subtree at once.
///
/// # Example
///
/// ```
/// use formwork::vocab::{Subtree, TokenTrie, TrieVisitor, TrieStep};
///
/// let tokens: Vec<(u32, &[u8])> = vec![(0, b"a"), (1, b"ab"), (2, b"b")];
/// let trie = TokenTrie::new(tokens.iter().map(|&(id, b)| (id, b)));
///
/// // Collect every token that starts with `a`.
/// struct StartsWithA(Vec<u32>);
/// impl TrieVisitor for StartsWithA {
///     type State = ();
///     fn step(&mut self, _: &(), byte: u8, depth: usize, _: Subtree) -> TrieStep<()> {
///         if depth == 1 && byte != b'a' { TrieStep::Skip } else { TrieStep::Enter(()) }
///     }
///     fn tokens(&mut self, _: &(), tokens: &[u32]) { self.0.extend_from_slice(tokens) }
/// }
/// let mut v = StartsWithA(vec![]);
/// trie.walk((), &mut v);
/// assert_eq!(v.0, vec![0, 1]);
/// ```
#[derive(Clone, Debug)]
pub struct TokenTrie {
    nodes: Vec<Node>,
    tokens: Vec<TokenId>,
    /// The tokens' bytes in position order, token `p` ending at `text_ends[p + 1]`: list
    /// walks read them in order instead of each token's bytes by id, far apart.
    text: Vec<u8>,
    text_ends: Vec<u32>,
    max_depth: usize,
}

/// What a [`TrieVisitor`] decides for a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrieStep<S> {
    /// Enter the node with this state; its tokens are reported, its children visited.
    Enter(S),
    /// Skip the node and its whole subtree.
    Skip,
}

/// A client of [`TokenTrie::walk`]: a state per trie depth, advanced one byte at a time.
pub trait TrieVisitor {
    /// The state reached after a node's prefix.
    type State: Clone;
    /// Advance `parent` by `byte` into a node (`depth` = its byte length; `subtree` = the node's
    /// whole subtree, what a skip leaves out).
    fn step(
        &mut self,
        parent: &Self::State,
        byte: u8,
        depth: usize,
        subtree: Subtree,
    ) -> TrieStep<Self::State>;
    /// The tokens ending at the node just entered, with the state after their last byte.
    fn tokens(&mut self, state: &Self::State, tokens: &[TokenId]);
}

/// A node's subtree, as [`TrieVisitor::step`] sees it: its tokens are looked up only when asked
/// for (they sit at the subtree's far end, a cache miss a walk should not pay at every node).
#[derive(Clone, Copy, Debug)]
pub struct Subtree<'a> {
    trie: &'a TokenTrie,
    node: usize,
}

impl<'a> Subtree<'a> {
    /// Every token whose bytes start with the node's prefix.
    pub fn tokens(&self) -> &'a [TokenId] {
        self.trie.subtree_tokens(self.node)
    }

    /// The positions of those tokens (see [`TokenTrie::token_at`]).
    pub(crate) fn positions(&self) -> std::ops::Range<u32> {
        self.trie.subtree_positions(self.node)
    }

    /// Byte length of the longest of those tokens, or `usize::MAX` from 255 bytes on (the
    /// node stores a saturated byte: a walk that skips subtrees of short tokens must not take
    /// a longer token for a short one).
    pub(crate) fn deepest(&self) -> usize {
        match self.trie.nodes[self.node].deepest {
            u8::MAX => usize::MAX,
            d => d as usize,
        }
    }
}

impl TokenTrie {
    /// Builds the trie from `(id, bytes)` pairs. Empty byte strings are ignored.
    pub fn new<'a>(tokens: impl IntoIterator<Item = (TokenId, &'a [u8])>) -> TokenTrie {
        let mut sorted: Vec<(&[u8], TokenId)> = tokens
            .into_iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(id, b)| (b, id))
            .collect();
        sorted.sort_unstable();
        let mut nodes = vec![Node {
            tokens_start: 0,
            tokens_end: 0,
            subtree_end: 0,
            depth: 0,
            byte: 0,
            deepest: 0,
        }];
        let mut out_tokens = Vec::with_capacity(sorted.len());
        // `path[d]` is the index of the open node at depth d along the current token's prefix.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        let mut text = Vec::new();
        let mut text_ends = vec![0];
        for (bytes, id) in sorted {
            text.extend_from_slice(bytes);
            text_ends.push(text.len() as u32);
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close nodes deeper than the shared prefix: their subtrees are complete.
            while path.len() > common + 1 {
                let closed = path.pop().unwrap();
                nodes[closed].subtree_end = nodes.len() as u32;
                nodes[closed].tokens_end = out_tokens.len() as u32;
            }
            for (d, &byte) in bytes.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(Node {
                    tokens_start: out_tokens.len() as u32,
                    tokens_end: 0,
                    subtree_end: 0,
                    depth: (d + 1) as u16,
                    byte,
                    deepest: 0,
                });
            }
            let len = bytes.len().min(u8::MAX as usize) as u8;
            path.iter()
                .for_each(|&n| nodes[n].deepest = nodes[n].deepest.max(len));
            out_tokens.push(id);
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(closed) = path.pop() {
            nodes[closed].subtree_end = nodes.len() as u32;
            nodes[closed].tokens_end = out_tokens.len() as u32;
        }
        // A sentinel so `tokens_start` of node i+1 bounds node i's tokens and the subtree ranges.
        nodes.push(Node {
            tokens_start: out_tokens.len() as u32,
            tokens_end: out_tokens.len() as u32,
            subtree_end: 0,
            depth: 0,
            byte: 0,
            deepest: 0,
        });
        TokenTrie {
            nodes,
            tokens: out_tokens,
            text,
            text_ends,
            max_depth,
        }
    }

    /// Number of nodes, root included.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len() - 1
    }

    /// Number of tokens stored.
    pub fn num_tokens(&self) -> usize {
        self.tokens.len()
    }

    /// Length in bytes of the longest token.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The tokens of `node`'s whole subtree (the node's own tokens included), in DFS order.
    fn subtree_tokens(&self, node: usize) -> &[TokenId] {
        let range = self.subtree_positions(node);
        &self.tokens[range.start as usize..range.end as usize]
    }

    fn subtree_positions(&self, node: usize) -> std::ops::Range<u32> {
        self.nodes[node].tokens_start..self.nodes[node].tokens_end
    }

    /// The tokens whose bytes start with `prefix`.
    ///
    /// ```
    /// use formwork::vocab::TokenTrie;
    ///
    /// let trie = TokenTrie::new([(0, &b"ab"[..]), (1, b"b"), (2, b"a"), (3, b"abc")]);
    /// assert_eq!(trie.starting_with(b"ab"), &[0, 3]);
    /// assert_eq!(trie.starting_with(b"c"), &[] as &[u32]);
    /// ```
    pub fn starting_with(&self, prefix: &[u8]) -> &[TokenId] {
        let mut node = 0;
        for &byte in prefix {
            // The children of `node` follow it, each after its sibling's subtree.
            let end = self.nodes[node].subtree_end as usize;
            let mut child = node + 1;
            while child < end && self.nodes[child].byte != byte {
                child = self.nodes[child].subtree_end as usize;
            }
            if child >= end {
                return &[];
            }
            node = child;
        }
        self.subtree_tokens(node)
    }

    /// The token at a *position*: the tokens' index in depth-first order (byte order). A
    /// subtree's tokens are a range of positions, so a token list kept as sorted positions can
    /// be walked along the trie (`TokenTrie::walk_positions`).
    #[inline]
    pub fn token_at(&self, position: u32) -> TokenId {
        self.tokens[position as usize]
    }

    /// The root's children: each first byte with the tokens that start with it.
    ///
    /// ```
    /// use formwork::vocab::TokenTrie;
    ///
    /// let trie = TokenTrie::new([(0, &b"ab"[..]), (1, b"b"), (2, b"a")]);
    /// let groups: Vec<(u8, Vec<u32>)> =
    ///     trie.by_first_byte().map(|(b, ts)| (b, ts.to_vec())).collect();
    /// assert_eq!(groups, vec![(b'a', vec![2, 0]), (b'b', vec![1])]);
    /// ```
    pub fn by_first_byte(&self) -> impl Iterator<Item = (u8, &[TokenId])> + '_ {
        let end = self.nodes.len() - 1;
        std::iter::successors((end > 1).then_some(1), move |&i| {
            let next = self.nodes[i].subtree_end as usize;
            (next < end).then_some(next)
        })
        .map(|i| (self.nodes[i].byte, self.subtree_tokens(i)))
    }

    /// Steps the tokens at `positions` (ascending) from `root`, as [`walk_sorted`] does: a
    /// token shares the states of the prefix it has in common with the previous one, and a
    /// rejected byte settles every listed token behind it.
    pub(crate) fn walk_positions<S: Clone, E>(
        &self,
        positions: &[u32],
        root: S,
        advance: impl FnMut(&S, u8) -> Result<Option<S>, E>,
        report: impl FnMut(&[u32], bool, &S),
    ) -> Result<(), E> {
        let mut advance = advance;
        let advance = |s: &S, byte: u8, slot: &mut S| {
            Ok(advance(s, byte)?.map(|next| *slot = next).is_some())
        };
        walk_sorted(positions, |p| self.position_bytes(p), root, advance, report)
    }

    /// The positions of the tokens holding `byte`, ascending: one pass over the tokens'
    /// bytes, laid out in position order.
    pub(crate) fn positions_holding(&self, byte: u8) -> Vec<u32> {
        let mut positions: Vec<u32> = Vec::new();
        let mut p = 0;
        for at in memchr::memchr_iter(byte, &self.text) {
            while self.text_ends[p + 1] as usize <= at {
                p += 1;
            }
            if positions.last() != Some(&(p as u32)) {
                positions.push(p as u32);
            }
        }
        positions
    }

    /// The length of the token at `position`: read in position order, it reads the token
    /// ends in order, where [`Vocab::token_bytes`](super::Vocab::token_bytes) of each token id
    /// lands far apart.
    #[inline]
    pub(crate) fn position_len(&self, position: u32) -> usize {
        let p = position as usize;
        (self.text_ends[p + 1] - self.text_ends[p]) as usize
    }

    /// The bytes of the token at `position`.
    fn position_bytes(&self, position: u32) -> &[u8] {
        let p = position as usize;
        &self.text[self.text_ends[p] as usize..self.text_ends[p + 1] as usize]
    }

    /// Visits the trie depth-first from `root`, skipping every subtree the visitor rejects.
    pub fn walk<V: TrieVisitor>(&self, root: V::State, visitor: &mut V) {
        let mut stack: Vec<V::State> = Vec::with_capacity(self.max_depth + 1);
        stack.push(root);
        let end = self.nodes.len() - 1;
        let mut i = 1;
        while i < end {
            let node = self.nodes[i];
            let depth = node.depth as usize;
            stack.truncate(depth);
            let subtree = Subtree {
                trie: self,
                node: i,
            };
            match visitor.step(&stack[depth - 1], node.byte, depth, subtree) {
                TrieStep::Enter(state) => {
                    // DFS order: the next node's first token bounds this node's own tokens.
                    let own = node.tokens_start as usize..self.nodes[i + 1].tokens_start as usize;
                    if !own.is_empty() {
                        visitor.tokens(&state, &self.tokens[own]);
                    }
                    stack.push(state);
                    i += 1;
                }
                TrieStep::Skip => i = node.subtree_end as usize,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node's positions are its subtree's tokens, `deepest` their longest length (past
    /// the stored byte's range, unknown), and `positions_holding` finds exactly the tokens
    /// holding a byte.
    #[test]
    fn subtrees_know_their_positions_and_longest_token() {
        let long = vec![b'a'; 300];
        let words: Vec<&[u8]> = vec![
            b"a", b"ab", b"abc", b"abd", b"b", b"ba", b"bxb", b"c", b"ca", b"cab", b"x", &long,
        ];
        let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, *w)));
        struct Check<'w>(&'w [&'w [u8]], usize);
        impl TrieVisitor for Check<'_> {
            type State = Vec<u8>;
            fn step(
                &mut self,
                parent: &Vec<u8>,
                byte: u8,
                _: usize,
                subtree: Subtree,
            ) -> TrieStep<Vec<u8>> {
                let prefix = [parent.as_slice(), &[byte]].concat();
                let tokens: Vec<TokenId> = subtree
                    .positions()
                    .map(|p| subtree.trie.token_at(p))
                    .collect();
                assert_eq!(tokens, subtree.tokens(), "{prefix:?}");
                let longest = tokens.iter().map(|&t| self.0[t as usize].len()).max();
                let want = longest.map(|n| if n >= 255 { usize::MAX } else { n });
                assert_eq!(Some(subtree.deepest()), want, "{prefix:?}");
                assert!(tokens
                    .iter()
                    .all(|&t| self.0[t as usize].starts_with(&prefix)));
                self.1 += 1;
                TrieStep::Enter(prefix)
            }
            fn tokens(&mut self, _: &Vec<u8>, _: &[TokenId]) {}
        }
        let mut check = Check(&words, 0);
        trie.walk(Vec::new(), &mut check);
        assert_eq!(
            check.1 + 1,
            trie.num_nodes(),
            "every node but the root is visited"
        );
        for byte in [b'a', b'b', b'x', b'z'] {
            let want: Vec<u32> = (0..trie.num_tokens() as u32)
                .filter(|&p| words[trie.token_at(p) as usize].contains(&byte))
                .collect();
            assert_eq!(trie.positions_holding(byte), want, "{}", byte as char);
        }
    }

    /// Every listed token is reported once, taken iff no byte of it is rejected, with the state
    /// before the rejected byte; unlisted tokens never are.
    #[test]
    fn walk_positions_reports_each_listed_token_once() {
        let words: Vec<&[u8]> = vec![
            b"a", b"ab", b"abc", b"abd", b"b", b"ba", b"bx", b"c", b"ca", b"cab", b"x", b"xy",
        ];
        let trie = TokenTrie::new(words.iter().enumerate().map(|(i, w)| (i as u32, *w)));
        // A state is the bytes taken so far; `x` is rejected anywhere.
        let advance = |s: &Vec<u8>, b: u8| -> Result<Option<Vec<u8>>, ()> {
            Ok((b != b'x').then(|| [s.as_slice(), &[b]].concat()))
        };
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200 {
            let positions: Vec<u32> = (0..trie.num_tokens() as u32)
                .filter(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed % 3 == 0
                })
                .collect();
            let mut seen = Vec::new();
            trie.walk_positions(&positions, Vec::new(), advance, |run, taken, last| {
                for &p in run {
                    let bytes = words[trie.token_at(p) as usize];
                    let ok = !bytes.contains(&b'x');
                    assert_eq!(taken, ok, "{bytes:?}");
                    let reached = if ok {
                        bytes.len()
                    } else {
                        bytes.iter().position(|&b| b == b'x').unwrap()
                    };
                    assert_eq!(last.as_slice(), &bytes[..reached]);
                    seen.push(p);
                }
            })
            .unwrap();
            assert_eq!(seen, positions);
        }
    }
}
