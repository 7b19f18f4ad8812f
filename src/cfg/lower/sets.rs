//! What the mask walks need to know of a compiled program: the vocabulary slices worth a
//! proof.

use std::ops::Range;

use crate::base::byteset::ByteSet;
use crate::cfg::program::{Program, CALLS, SCANS};
use crate::vocab::Vocab;

impl Program {
    /// The slices a mask walk of this program should try: the two broadest always, a narrower
    /// one only if some state takes (itself or through the units it calls) every byte its
    /// strings start with and could take it where the slice before it fails: by refusing a
    /// byte that slice starts with (a URI's characters, names limited by a pattern), or, for
    /// a slice that starts alike and refuses bytes inside its strings (the no-line-terminator
    /// slice: a pattern's `.` in a JSON string), by telling those bytes from the ones it
    /// takes. Other grammars would only fail its proof at every walk where no slice fits
    /// (JSON keys, numbers). `states` are the states to look at (those of units built since
    /// `worth` was found), `unit_first` the bytes each unit may start with.
    pub fn slices_worth_trying(
        &self,
        vocab: &Vocab,
        unit_first: &[ByteSet],
        states: Range<u32>,
        worth: u32,
    ) -> u32 {
        let slices = vocab.slices();
        let first: Vec<ByteSet> = slices.iter().map(|s| s.first_bytes()).collect();
        // Whether state `s` takes slice `k`: every first byte of the slice by its own edges
        // (most states miss some and call nothing) or else through a callee. Its bytes and
        // its callees' first bytes are computed once per state.
        let takes = |s: u32, k: usize, own: &mut Option<ByteSet>, callees: &mut Option<ByteSet>| {
            let own = *own.get_or_insert_with(|| {
                self.live(s).iter().fold(ByteSet::EMPTY, |acc, c| {
                    acc.union(&self.alphabet.sets[usize::from(c)])
                })
            });
            let missing = first[k].intersection(&own.complement());
            if missing.is_empty() {
                return true;
            }
            if self.state(s).flags & CALLS == 0 {
                return false;
            }
            let from_callees = *callees.get_or_insert_with(|| self.callees_first(s, unit_first));
            from_callees.intersection(&missing) == missing
        };
        // A byte whose class holds only bytes the slice refuses: where no class separates them
        // from bytes it takes, a state refusing them refuses those too, so fails both slices.
        let separates = |refused: ByteSet| {
            refused.iter().any(|b| {
                let class =
                    &self.alphabet.sets[usize::from(self.alphabet.class_of[usize::from(b)])];
                class.intersection(&refused) == *class
            })
        };
        let alike: Vec<bool> = (0..first.len())
            .map(|k| k >= 2 && first[k] == first[k - 1])
            .collect();
        // The slices some state could fit, if any does.
        let candidates = (2..first.len())
            .filter(|&k| !alike[k] || separates(slices[k].narrowed()))
            .fold(0u32, |acc, k| acc | 1 << k);
        // One pass over the states for all the slices.
        let mut worth = worth | 0b11;
        for s in states.filter(|&s| self.state(s).flags & SCANS != 0) {
            if worth & candidates == candidates {
                break;
            }
            let (mut own, mut callees) = (None, None);
            let open = candidates & !worth;
            for k in (2..first.len()).filter(|&k| open >> k & 1 != 0) {
                let fits = takes(s, k, &mut own, &mut callees)
                    && (alike[k] || !takes(s, k - 1, &mut own, &mut callees));
                if fits {
                    worth |= 1 << k;
                }
            }
        }
        worth
    }

    /// The bytes the units `s` calls may start with, by `first` (any byte if one is
    /// nullable).
    fn callees_first(&self, s: u32, first: &[ByteSet]) -> ByteSet {
        self.calls_of(s).iter().fold(ByteSet::EMPTY, |acc, c| {
            match self.units[c.unit as usize].nullable {
                true => ByteSet::FULL,
                false => acc.union(&first[c.unit as usize]),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::cfg::lower::tests::compile_for_test;

    /// The ASCII slices are tried where some state takes every byte they start with and not
    /// every byte of the broader slice (itself or through what it calls): a URI's characters,
    /// names limited to alphanumerics and `_`; not JSON keys, numbers or plain strings.
    #[test]
    fn ascii_slices_are_tried_where_a_state_could_take_them() {
        let slices = |gbnf: &str| {
            compile_for_test(&crate::front::gbnf::gbnf_to_ir(gbnf, "g").unwrap()).slices
        };
        // Bits follow `vocab::slice::PATTERNS`: 2 is JSON text without line terminators.
        let (unreserved, alphanumeric) = (1 << 3, 1 << 4);
        assert_eq!(slices(r#"root ::= "\"" [^"\\]* "\"""#), 0b11);
        assert_eq!(
            slices(r#"root ::= "\"" [A-Za-z0-9._~-]+ "\"""#) & unreserved,
            unreserved
        );
        assert_eq!(slices(r#"root ::= [A-Za-z0-9_]+"#), 0b11 | alphanumeric);
        let schema = serde_json::json!({"type": "object", "properties": {
            "count": {"type": "integer"}, "name": {"type": "string"}}});
        let json = crate::front::json_schema::compile_schema(
            &schema,
            &crate::front::json_schema::JsonSchemaOptions::new(),
        )
        .unwrap()
        .grammar;
        assert_eq!(compile_for_test(&json).slices, 0b11);
    }

    /// The no-line-terminator slice starts with the JSON string slice's bytes and refuses
    /// U+2028 and U+2029 inside: it is tried where the grammar tells their last bytes from
    /// the other continuation bytes (a pattern's `.`), not for plain strings.
    #[test]
    fn the_no_line_terminator_slice_is_tried_where_a_class_refuses_line_terminators() {
        let slices = |schema: serde_json::Value| {
            let options = crate::front::json_schema::JsonSchemaOptions::new();
            let compiled = crate::front::json_schema::compile_schema(&schema, &options).unwrap();
            compile_for_test(&compiled.grammar).slices
        };
        // Bits follow `vocab::slice::PATTERNS`.
        let no_line_terminator = 1 << 2;
        let dot = slices(serde_json::json!({"type": "string", "pattern": "^.+$"}));
        assert_eq!(dot & no_line_terminator, no_line_terminator, "{dot:#b}");
        assert_eq!(slices(serde_json::json!({"type": "string"})), 0b11);
        let vocab = crate::vocab::Vocab::from_token_bytes(Vec::new(), &[], &[]).unwrap();
        let narrowed: Vec<u8> = vocab.slices()[2].narrowed().iter().collect();
        assert_eq!(narrowed, [0xA8, 0xA9]);
    }
}
