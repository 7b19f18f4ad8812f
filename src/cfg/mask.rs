//! Token masks for the Earley engine: the adaptive token-mask cache (XGrammar §3, XGrammar 2's
//! Earley-based cache) and the trie walks that fill it.
//!
//! The last row's *kernel* items (origin before the row) are what the row is made of: every
//! other item was predicted from them. A token is allowed iff some kernel item can take it, so
//! the mask is the union over kernel items, each classified in two cached levels:
//!
//! 1. **Item level** (keyed by the state's structural hash and its repetition counter's
//!    distance from the bounds): walk the whole token trie with a chart holding only the item,
//!    its unit entered from an unknown context. A token is *accepted* if the item's own
//!    derivations take all its bytes, *uncertain* if the unit completes inside the token with
//!    bytes left over (those need the context), *rejected* otherwise. Completions before the
//!    first byte are ignored: the real row already performed them, and the items they produced
//!    are kernel items of their own.
//! 2. **Context level** (keyed by the item-level key and the item's callers in the chart, up to
//!    `context_depth` levels, as a canonical description): re-walk only the uncertain tokens
//!    with those callers present. What they accept is added; what completes past the outermost
//!    caller stays uncertain and is checked against the full chart at run time.
//!
//! Both levels hold exact facts (accepted tokens really are allowed, rejected ones never are),
//! so a cache hit for a structurally equal item of another grammar is as good as a local one.
//! Special tokens and EOS are decided directly from the last row.

use super::chart::{Chart, Item, Overflow, END, EXT};
use super::program::{Program, CALLS, COUNTED, SPECIALS, UNBOUNDED};
use super::CfgGrammar;
use crate::ir::StructHasher;
use crate::mask::{set_bit, StoredMask, Weigh};
use crate::vocab::{TokenId, TokenTrie, TrieStep, TrieVisitor, Vocab};

const LEVEL1_DOMAIN: u64 = 0x6366_676c_6576_0001;
const LEVEL2_DOMAIN: u64 = 0x6366_676c_6576_0002;

/// A cached classification.
#[derive(Debug)]
pub(crate) enum CacheEntry {
    Item {
        accepted: StoredMask,
        uncertain: Box<[TokenId]>,
    },
    Context {
        accepted: Box<[TokenId]>,
        uncertain: Box<[TokenId]>,
    },
}

impl Weigh for CacheEntry {
    fn weight(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                CacheEntry::Item {
                    accepted,
                    uncertain,
                } => accepted.heap_bytes() + uncertain.len() * 4,
                CacheEntry::Context {
                    accepted,
                    uncertain,
                } => (accepted.len() + uncertain.len()) * 4,
            }
    }
}

/// Buffers reused across masks (a matcher owns one), so a cached mask allocates nothing.
#[derive(Default, Debug)]
pub(crate) struct Scratch {
    kernel: Vec<Item>,
    pending: Vec<TokenId>,
    done: Vec<u128>,
    explored: Vec<(u32, u32)>,
    found: Vec<(u32, Item)>,
    rows: Vec<u32>,
    described: Vec<(u32, u128, u64, u32)>,
}

/// Fills `out` (already sized) with the mask after the chart's rows.
pub(crate) fn fill(
    g: &CfgGrammar,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
) -> Result<(), Overflow> {
    out.fill(0);
    if g.config.mask_cache {
        fill_cached(g, chart, scratch, out)?;
    } else {
        let base = chart.num_rows();
        let mut walk = TrieWalk::new(&g.prog, g.vocab.trie(), chart, out, None);
        g.vocab.trie().walk(false, &mut walk);
        walk.finish()?;
        chart.truncate(base);
    }
    let prog = &g.prog;
    for it in chart.last_row() {
        if prog.state(it.state).flags & SPECIALS != 0 {
            for &(sid, _) in prog.specials_of(it.state) {
                set_bit(out, prog.specials[sid as usize].1);
            }
        }
    }
    if chart.is_accepting(prog) {
        g.vocab.eos_tokens().iter().for_each(|&t| set_bit(out, t));
    }
    Ok(())
}

fn fill_cached(
    g: &CfgGrammar,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
) -> Result<(), Overflow> {
    let prog = &g.prog;
    let vocab = &g.vocab;
    let here = chart.num_rows() - 1;
    let Scratch {
        kernel,
        pending,
        done,
        ..
    } = scratch;
    kernel.clear();
    if here == 0 {
        // Row 0 is the closure of the start item, whose completion ends the text.
        let start = prog.units[prog.start_unit as usize].start;
        kernel.push(Item {
            state: start,
            origin: END,
            count: 0,
        });
    } else {
        kernel.extend(
            chart
                .last_row()
                .iter()
                .filter(|it| (it.origin as usize) < here),
        );
    }
    pending.clear();
    done.clear();
    let kernel = std::mem::take(kernel);
    let mut pending = std::mem::take(pending);
    for k in &kernel {
        let k1 = item_key(g, k);
        let item = match g.cache.get(&k1) {
            Some(e) => e,
            None => g.cache.insert(k1, item_level(g, k)?),
        };
        let CacheEntry::Item {
            accepted,
            uncertain,
        } = &*item
        else {
            unreachable!("item keys hold item entries")
        };
        if !scratch.done.contains(&k1) {
            accepted.or_into(out, vocab.text_mask());
            scratch.done.push(k1);
        }
        if uncertain.is_empty() {
            continue;
        }
        if g.config.context_depth == 0 {
            pending.extend_from_slice(uncertain);
            continue;
        }
        let k2 = context_key(g, chart, scratch, k, k1);
        let entry = match g.cache.get(&k2) {
            Some(e) => e,
            None => g
                .cache
                .insert(k2, Context::build(scratch, k).classify(g, uncertain)?),
        };
        let CacheEntry::Context {
            accepted,
            uncertain,
        } = &*entry
        else {
            unreachable!("context keys hold context entries")
        };
        accepted.iter().for_each(|&t| set_bit(out, t));
        pending.extend_from_slice(uncertain);
    }
    scratch.kernel = kernel;
    if !pending.is_empty() {
        // What is left depends on the whole chart: check it, sharing prefixes in trie order.
        pending.sort_unstable_by(|&a, &b| {
            vocab
                .token_bytes(a)
                .cmp(vocab.token_bytes(b))
                .then(a.cmp(&b))
        });
        pending.dedup();
        pending.retain(|&t| !crate::mask::get_bit(out, t));
        walk_list(&g.prog, vocab, chart, &pending, |t, outcome| {
            if matches!(outcome, Outcome::Accepted) {
                set_bit(out, t);
            }
        })?;
    }
    scratch.pending = pending;
    Ok(())
}

/// A cached token set in the form that is fastest to OR into a mask: an id list while it is
/// short, else the bitset (one vectorized pass beats thousands of scattered bit writes).
fn stored(words: &[u32], universe: &[u32]) -> StoredMask {
    const MAX_IDS: usize = 256;
    match StoredMask::from_words(words, universe) {
        StoredMask::Accepted(ids) | StoredMask::Rejected(ids) if ids.len() > MAX_IDS => {
            StoredMask::Bitset(words.into())
        }
        small => small,
    }
}

/// The repetition counter as it matters to a token of at most `cap - 1` bytes: its distance
/// to the upper bound and to the lower bound, each capped (XGrammar 2's repetition
/// compression, exact: counters further than a token from both bounds behave alike).
fn count_class(prog: &Program, it: &Item, cap: u32) -> u64 {
    let st = prog.state(it.state);
    if st.flags & COUNTED == 0 {
        return 0;
    }
    let c = prog.units[st.unit as usize].counted.expect("counted state");
    let to_max = if c.max == UNBOUNDED {
        cap
    } else {
        (c.max - it.count).min(cap)
    };
    let to_min = c.min.saturating_sub(it.count).min(cap);
    ((to_max as u64) << 32) | to_min as u64
}

fn cap(vocab: &Vocab) -> u32 {
    vocab.max_token_len() as u32 + 1
}

fn item_key(g: &CfgGrammar, it: &Item) -> u128 {
    let mut h = StructHasher::new(LEVEL1_DOMAIN);
    h.hash(g.hashes().state(it.state))
        .word(count_class(&g.prog, it, cap(&g.vocab)));
    h.finish()
}

/// Item level: the whole trie against the item alone.
fn item_level(g: &CfgGrammar, k: &Item) -> Result<CacheEntry, Overflow> {
    let prog = &g.prog;
    let vocab = &g.vocab;
    let top = Item {
        state: k.state,
        origin: EXT,
        count: k.count,
    };
    let mut chart = Chart::local(prog, g.config.row_limits(), &[], &[top])?;
    let mut words = vec![0u32; vocab.mask_words()];
    let mut uncertain = Vec::new();
    let mut walk = TrieWalk::new(
        prog,
        vocab.trie(),
        &mut chart,
        &mut words,
        Some(&mut uncertain),
    );
    vocab.trie().walk(false, &mut walk);
    walk.finish()?;
    Ok(CacheEntry::Item {
        accepted: stored(&words, vocab.text_mask()),
        uncertain: uncertain.into(),
    })
}

/// Gathers `k`'s callers in the chart into `scratch` (callers of its unit in its origin row,
/// their callers, ... up to `context_depth` levels) and returns the context-level key: the
/// item-level key and a canonical description of those rows, where origins inside the gathered
/// rows are renumbered and callers whose own callers were not gathered get origin [`EXT`].
fn context_key(
    g: &CfgGrammar,
    chart: &Chart,
    scratch: &mut Scratch,
    k: &Item,
    item_key: u128,
) -> u128 {
    let prog = &g.prog;
    let Scratch {
        explored,
        found,
        rows,
        described,
        ..
    } = scratch;
    explored.clear();
    found.clear();
    rows.clear();
    described.clear();
    if k.origin != END {
        explored.push((k.origin, prog.state(k.state).unit));
        let mut frontier = 0;
        for depth in 1..=g.config.context_depth {
            let level_end = explored.len();
            while frontier < level_end {
                let (row, unit) = explored[frontier];
                frontier += 1;
                for w in chart.row(row as usize) {
                    if !waits_for(prog, w, unit) || found.contains(&(row, *w)) {
                        continue;
                    }
                    found.push((row, *w));
                    let next = (w.origin, prog.state(w.state).unit);
                    if depth < g.config.context_depth && !explored.contains(&next) {
                        explored.push(next);
                    }
                }
            }
        }
        rows.extend(explored.iter().map(|e| e.0));
        rows.sort_unstable();
        rows.dedup();
        for (row, w) in found.iter_mut() {
            *row = vrow(rows, *row);
            w.origin = if explored.contains(&(w.origin, prog.state(w.state).unit)) {
                vrow(rows, w.origin)
            } else {
                EXT
            };
        }
    }
    let hashes = g.hashes();
    let cap = cap(&g.vocab);
    described.extend(found.iter().map(|(r, w)| {
        (
            *r,
            hashes.state(w.state),
            count_class(prog, w, cap),
            w.origin,
        )
    }));
    described.sort_unstable();
    let top_origin = if k.origin == END {
        END
    } else {
        vrow(rows, k.origin)
    };
    let mut h = StructHasher::new(LEVEL2_DOMAIN);
    h.hash(item_key)
        .word(rows.len() as u64)
        .word(top_origin as u64)
        .word(described.len() as u64);
    for (r, s, c, o) in described.iter() {
        h.word(*r as u64).hash(*s).word(*c).word(*o as u64);
    }
    h.finish()
}

/// Index of a gathered row among the gathered rows.
fn vrow(rows: &[u32], r: u32) -> u32 {
    rows.binary_search(&r).expect("gathered row") as u32
}

/// A kernel item's callers, as frozen rows for a local chart.
struct Context {
    rows: Vec<Vec<Item>>,
    top: Item,
}

impl Context {
    /// The local chart's rows from what [`context_key`] gathered.
    fn build(scratch: &Scratch, k: &Item) -> Context {
        if k.origin == END {
            return Context {
                rows: Vec::new(),
                top: *k,
            };
        }
        let mut rows = vec![Vec::new(); scratch.rows.len()];
        for (r, w) in &scratch.found {
            rows[*r as usize].push(*w);
        }
        Context {
            rows,
            top: Item {
                origin: vrow(&scratch.rows, k.origin),
                ..*k
            },
        }
    }

    /// Re-walks the item level's uncertain tokens with the callers present.
    fn classify(&self, g: &CfgGrammar, uncertain: &[TokenId]) -> Result<CacheEntry, Overflow> {
        let mut chart = Chart::local(&g.prog, g.config.row_limits(), &self.rows, &[self.top])?;
        let mut accepted = Vec::new();
        let mut still = Vec::new();
        walk_list(
            &g.prog,
            &g.vocab,
            &mut chart,
            uncertain,
            |t, outcome| match outcome {
                Outcome::Accepted => accepted.push(t),
                Outcome::Failed { ext: true } => still.push(t),
                Outcome::Failed { ext: false } => {}
            },
        )?;
        Ok(CacheEntry::Context {
            accepted: accepted.into(),
            uncertain: still.into(),
        })
    }
}

/// Is `w` waiting in its row for `unit` to complete?
fn waits_for(prog: &Program, w: &Item, unit: u32) -> bool {
    let st = prog.state(w.state);
    if st.flags & CALLS == 0 {
        return false;
    }
    if st.flags & COUNTED != 0 {
        let c = prog.units[st.unit as usize].counted.expect("counted state");
        c.body == unit && c.can_iterate(w.count)
    } else {
        prog.calls_of(w.state).iter().any(|c| c.unit == unit)
    }
}

enum Outcome {
    Accepted,
    /// Some byte was rejected; `ext` if an [`EXT`] completion happened after at least one byte
    /// and before the rejected one.
    Failed {
        ext: bool,
    },
}

/// Pushes each token (sorted by bytes) on top of the chart, reusing the rows of the prefix it
/// shares with the previous token and skipping tokens that share a rejected prefix.
fn walk_list(
    prog: &Program,
    vocab: &Vocab,
    chart: &mut Chart,
    tokens: &[TokenId],
    mut report: impl FnMut(TokenId, Outcome),
) -> Result<(), Overflow> {
    let base = chart.num_rows();
    // ext_before[d]: an EXT completion happened at depth 1..=d on the current path.
    let mut ext_before: Vec<bool> = vec![false];
    let mut prev: &[u8] = &[];
    let mut depth = 0usize;
    // A rejected prefix of the previous token: (length including the rejected byte, ext).
    let mut dead: Option<(usize, bool)> = None;
    for &t in tokens {
        let bytes = vocab.token_bytes(t);
        let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
        prev = bytes;
        if let Some((len, ext)) = dead {
            if common >= len {
                report(t, Outcome::Failed { ext });
                continue;
            }
        }
        dead = None;
        depth = depth.min(common);
        chart.truncate(base + depth);
        ext_before.truncate(depth + 1);
        while depth < bytes.len() {
            if !chart.push_byte(prog, bytes[depth])? {
                break;
            }
            depth += 1;
            let ext = ext_before[depth - 1] || chart.row_ext(base + depth - 1);
            ext_before.push(ext);
        }
        if depth == bytes.len() {
            report(t, Outcome::Accepted);
        } else {
            let ext = ext_before[depth];
            dead = Some((depth + 1, ext));
            report(t, Outcome::Failed { ext });
        }
    }
    chart.truncate(base);
    Ok(())
}

/// A token-trie walk with the chart pushed and popped per byte. With `uncertain`, also
/// collects tokens whose bytes run past an [`EXT`] completion (after the first byte).
struct TrieWalk<'a> {
    prog: &'a Program,
    trie: &'a TokenTrie,
    chart: &'a mut Chart,
    base: usize,
    accepted: &'a mut [u32],
    uncertain: Option<&'a mut Vec<TokenId>>,
    error: Option<Overflow>,
}

impl<'a> TrieWalk<'a> {
    fn new(
        prog: &'a Program,
        trie: &'a TokenTrie,
        chart: &'a mut Chart,
        accepted: &'a mut [u32],
        uncertain: Option<&'a mut Vec<TokenId>>,
    ) -> Self {
        let base = chart.num_rows();
        TrieWalk {
            prog,
            trie,
            chart,
            base,
            accepted,
            uncertain,
            error: None,
        }
    }

    fn finish(self) -> Result<(), Overflow> {
        self.chart.truncate(self.base);
        self.error.map_or(Ok(()), Err)
    }
}

impl TrieVisitor for TrieWalk<'_> {
    /// An EXT completion happened on the path (after at least one byte).
    type State = bool;

    #[inline]
    fn step(&mut self, ext: &bool, byte: u8, depth: usize, node: usize) -> TrieStep<bool> {
        if self.error.is_some() {
            return TrieStep::Skip;
        }
        self.chart.truncate(self.base + depth - 1);
        match self.chart.push_byte(self.prog, byte) {
            Ok(true) => TrieStep::Enter(*ext || self.chart.row_ext(self.base + depth - 1)),
            Ok(false) => {
                if *ext {
                    if let Some(u) = self.uncertain.as_mut() {
                        u.extend_from_slice(self.trie.subtree_tokens(node));
                    }
                }
                TrieStep::Skip
            }
            Err(e) => {
                self.error = Some(e);
                TrieStep::Skip
            }
        }
    }

    #[inline]
    fn tokens(&mut self, _: &bool, tokens: &[TokenId]) {
        tokens.iter().for_each(|&t| set_bit(self.accepted, t));
    }
}
