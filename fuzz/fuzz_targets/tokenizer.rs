#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        // libfuzzer-sys's panic hook aborts on every panic, even one formwork catches: the
        // tokenizers crate panics on some malformed files and `Vocab` turns that panic into the
        // file's typed error. With the default hook back, a caught panic is only printed, and an
        // uncaught one still aborts (libfuzzer-sys runs the input inside catch_unwind and
        // aborts on Err), so the fuzzer still reports what would take a server down.
        drop(std::panic::take_hook());
    },
    |data: &[u8]| formwork_testkit::targets::tokenizer(data)
);
