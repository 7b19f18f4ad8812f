//! The token trie: every text token's bytes in one prefix tree, laid out in depth-first order.
//!
//! A mask computation walks the trie once instead of testing each token separately: a token
//! sharing a prefix with its neighbours re-uses the state reached on that prefix, and the first
//! rejected byte skips the whole subtree below it (`subtree_end`), which is what makes a walk over
//! a 150k-token vocabulary cheap (the llguidance paper, §"token trie").

use super::{gallop, TokenId};

/// One node: the byte leading into it from its parent, where its subtree ends, and the range of
/// `tokens` that end exactly here (several ids can share the same bytes).
#[derive(Clone, Copy, Debug)]
struct Node {
    byte: u8,
    depth: u16,
    subtree_end: u32,
    tokens_start: u32,
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
            byte: 0,
            depth: 0,
            subtree_end: 0,
            tokens_start: 0,
        }];
        let mut out_tokens = Vec::with_capacity(sorted.len());
        // `path[d]` is the index of the open node at depth d along the current token's prefix.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for (bytes, id) in sorted {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close nodes deeper than the shared prefix: their subtrees are complete.
            while path.len() > common + 1 {
                let closed = path.pop().unwrap();
                nodes[closed].subtree_end = nodes.len() as u32;
            }
            for (d, &byte) in bytes.iter().enumerate().skip(common) {
                path.push(nodes.len());
                nodes.push(Node {
                    byte,
                    depth: (d + 1) as u16,
                    subtree_end: 0,
                    tokens_start: out_tokens.len() as u32,
                });
            }
            out_tokens.push(id);
            max_depth = max_depth.max(bytes.len());
            prev = bytes;
        }
        while let Some(closed) = path.pop() {
            nodes[closed].subtree_end = nodes.len() as u32;
        }
        // A sentinel so `tokens_start` of node i+1 bounds node i's tokens and the subtree ranges.
        nodes.push(Node {
            byte: 0,
            depth: 0,
            subtree_end: 0,
            tokens_start: out_tokens.len() as u32,
        });
        TokenTrie {
            nodes,
            tokens: out_tokens,
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
        let start = self.nodes[node].tokens_start;
        start..self.nodes[self.nodes[node].subtree_end as usize].tokens_start
    }

    /// The token at a *position*: the tokens' index in depth-first order (byte order). A
    /// subtree's tokens are a range of positions, so a token list kept as sorted positions can
    /// be walked along the trie ([`TokenTrie::walk_positions`]).
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

    /// Steps the tokens at `positions` (ascending) from `root`, along the trie: only nodes
    /// leading to one of them are stepped, a subtree without any is passed over at once, and
    /// a rejected byte settles every listed token below it. Reports runs of positions with
    /// whether all their bytes were taken, and the last state reached (after the whole token,
    /// or before the rejected byte).
    pub(crate) fn walk_positions<S: Clone, E>(
        &self,
        positions: &[u32],
        root: S,
        mut advance: impl FnMut(&S, u8) -> Result<Option<S>, E>,
        mut report: impl FnMut(&[u32], bool, &S),
    ) -> Result<(), E> {
        let mut stack: Vec<S> = Vec::with_capacity(self.max_depth + 1);
        stack.push(root);
        let end = self.nodes.len() - 1;
        // `positions[next..]` are the tokens not reported yet.
        let mut next = 0;
        let mut i = 1;
        while i < end && next < positions.len() {
            let node = self.nodes[i];
            let subtree_end = self.nodes[node.subtree_end as usize].tokens_start;
            if positions[next] >= subtree_end {
                i = node.subtree_end as usize;
                continue;
            }
            let depth = node.depth as usize;
            stack.truncate(depth);
            // Galloping: a node's own tokens are one or two, a rejected subtree's any number.
            let up_to = |bound: u32| next + gallop(&positions[next..], |&p| p < bound);
            match advance(&stack[depth - 1], node.byte)? {
                None => {
                    let run = up_to(subtree_end);
                    report(&positions[next..run], false, &stack[depth - 1]);
                    next = run;
                    i = node.subtree_end as usize;
                }
                Some(state) => {
                    let own = up_to(self.nodes[i + 1].tokens_start);
                    if own > next {
                        report(&positions[next..own], true, &state);
                        next = own;
                    }
                    stack.push(state);
                    i += 1;
                }
            }
        }
        Ok(())
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
