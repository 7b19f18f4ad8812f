#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| formwork_testkit::targets::under_a_small_limit(data));
