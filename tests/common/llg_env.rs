//! llguidance's tokenizer environment for a formwork vocabulary's `tokenizer.json` (plain or
//! gzipped): shared by the llguidance differential tests and `cargo bench --bench peers`.

use std::io::Read;
use std::path::Path;

use llguidance::toktrie::TokEnv;

/// The tokenizer file's JSON text, gunzipped if the name ends in `.gz`.
pub fn tokenizer_json(path: &Path) -> Vec<u8> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut json = Vec::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file).read_to_end(&mut json)
    } else {
        std::io::BufReader::new(file).read_to_end(&mut json)
    }
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    json
}

/// llguidance's environment for the tokenizer at `path`, its masks `mask_width` bits wide (the
/// model's vocabulary size, as formwork's).
pub fn tok_env(path: &Path, mask_width: usize) -> TokEnv {
    toktrie_hf_tokenizers::ByteTokenizer::from_json_bytes(&tokenizer_json(path))
        .expect("llguidance reads the tokenizer")
        .into_tok_env(Some(mask_width))
        .expect("llguidance's token environment")
}
