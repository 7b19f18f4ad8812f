//! The rule graph: which rules refer to which, an order to build them in, whether they
//! recurse, and its strongly connected components. One analysis for every pass that follows references (the IR's own checks, the
//! template checks, the router, the Earley compiler), iterative throughout: rule chains are as
//! long as the grammar (see the [module docs](super)).

use super::{Expr, ExprId, Grammar, RuleId};

/// A cycle [`callees_first`] met: the nodes along it, first and last the same, and the edge
/// that closed it (the `edge`-th successor of node `from`, the last node before the repeat).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cycle {
    pub path: Vec<usize>,
    pub from: usize,
    pub edge: usize,
}

/// The nodes `0..n` in an order where each comes after every node it reaches (depth-first
/// post-order, roots and edges in index order), or the first cycle met. `successor(v, i)` is
/// the `i`-th successor of `v`, `None` past the last. The search runs on an explicit stack,
/// which is also the path that names a cycle.
pub(crate) fn callees_first(
    n: usize,
    successor: impl Fn(usize, usize) -> Option<usize>,
) -> Result<Vec<usize>, Cycle> {
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; n];
    let mut order = Vec::with_capacity(n);
    for root in 0..n {
        if state[root] != NEW {
            continue;
        }
        state[root] = ON_PATH;
        // (node, next edge to follow)
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some((v, edge)) = path.last_mut() {
            let v = *v;
            let Some(next) = successor(v, *edge) else {
                state[v] = DONE;
                order.push(v);
                path.pop();
                continue;
            };
            let taken = *edge;
            *edge += 1;
            match state[next] {
                NEW => {
                    state[next] = ON_PATH;
                    path.push((next, 0));
                }
                ON_PATH => {
                    let start = path.iter().position(|&(x, _)| x == next).unwrap_or(0);
                    return Err(Cycle {
                        path: path[start..]
                            .iter()
                            .map(|&(x, _)| x)
                            .chain(std::iter::once(next))
                            .collect(),
                        from: v,
                        edge: taken,
                    });
                }
                _ => {}
            }
        }
    }
    Ok(order)
}

/// Strongly connected components, in reverse topological order (callees first), iteratively.
pub(crate) fn strongly_connected(n: usize, succ: impl Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, successors, position)
        let mut work: Vec<(usize, Vec<usize>, usize)> = vec![(root, succ(root), 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some((v, succs, pos)) = work.last_mut() {
            if *pos < succs.len() {
                let w = succs[*pos];
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    let s = succ(w);
                    work.push((w, s, 0));
                } else if on_stack[w] {
                    let v = *v;
                    low[v] = low[v].min(index[w]);
                }
            } else {
                let v = *v;
                work.pop();
                if let Some((p, _, _)) = work.last() {
                    low[*p] = low[*p].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut scc = Vec::new();
                    loop {
                        // `v` itself is on the stack, below every node pushed after it.
                        let w = stack.pop().expect("v is on the stack");
                        on_stack[w] = false;
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(scc);
                }
            }
        }
    }
    out
}

impl Grammar {
    /// True if some rule reaches itself through references (a stack is needed, unless the
    /// recursion is only through repeats the IR already expresses).
    pub fn is_recursive(&self) -> bool {
        let refs = self.rule_graph();
        callees_first(self.rules.len(), |r, i| refs[r].get(i).map(|c| c.index())).is_err()
    }

    /// The rules referenced directly inside `expr` (not following references).
    pub fn rule_refs(&self, expr: ExprId) -> Vec<RuleId> {
        self.collect_rule_refs(expr, &mut vec![u32::MAX; self.exprs.len()], 0)
    }

    /// [`rule_refs`](Self::rule_refs) of every rule's body, in rule order.
    pub fn rule_graph(&self) -> &[Vec<RuleId>] {
        self.rule_graph.get_or_init(|| {
            // One visit mark array for all rules (a fresh one per rule was quadratic).
            let mut seen = vec![u32::MAX; self.exprs.len()];
            (0..self.rules.len())
                .map(|i| self.collect_rule_refs(self.rules[i].body, &mut seen, i as u32))
                .collect()
        })
    }

    /// Rules referenced inside `expr`, marking visited expressions with `mark` in `seen`.
    fn collect_rule_refs(&self, expr: ExprId, seen: &mut [u32], mark: u32) -> Vec<RuleId> {
        let mut out = Vec::new();
        let mut stack = vec![expr];
        while let Some(e) = stack.pop() {
            if std::mem::replace(&mut seen[e.index()], mark) == mark {
                continue;
            }
            match self.expr(e) {
                Expr::Rule(r) => out.push(*r),
                Expr::Seq(xs) | Expr::Alt(xs) => stack.extend(xs.iter().copied()),
                Expr::Repeat { body, .. } => stack.push(*body),
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph<'a>(edges: &'a [&'a [usize]]) -> impl Fn(usize, usize) -> Option<usize> + 'a {
        move |v, i| edges[v].get(i).copied()
    }

    #[test]
    fn callees_come_first() {
        // 0 -> 1 -> 2, 0 -> 2, 3 alone.
        let order = callees_first(4, graph(&[&[1, 2], &[2], &[], &[]])).unwrap();
        assert_eq!(order, vec![2, 1, 0, 3]);
    }

    #[test]
    fn a_cycle_is_named_along_its_path() {
        // 0 -> 1 -> 2 -> 1: the cycle 1 -> 2 -> 1, closed by the first edge of 2.
        let cycle = callees_first(3, graph(&[&[1], &[2], &[1]])).unwrap_err();
        assert_eq!(
            cycle,
            Cycle {
                path: vec![1, 2, 1],
                from: 2,
                edge: 0
            }
        );
        let self_loop = callees_first(1, graph(&[&[0]])).unwrap_err();
        assert_eq!(self_loop.path, vec![0, 0]);
    }

    #[test]
    fn long_chains_need_no_stack() {
        let n = 200_000;
        let order = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || callees_first(n, |v, i| (i == 0 && v + 1 < n).then_some(v + 1)))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(order.first(), Some(&(n - 1)));
        assert_eq!(order.len(), n);
    }
}
