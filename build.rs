//! Generates the request parser from `grammar/request.lalrpop` into `OUT_DIR`.

fn main() {
    println!("cargo:rerun-if-changed=grammar/request.lalrpop");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    lalrpop::Configuration::new()
        .set_in_dir("grammar")
        .set_out_dir(out_dir)
        .emit_rerun_directives(true)
        .process()
        .expect("grammar/request.lalrpop is a valid LALR(1) grammar");
}
