//! `format` values as regexes over the decoded string (whole-string match).
//!
//! Each follows the grammar its RFC gives, and is exact for it, with two exceptions:
//! `email` is RFC 5321's dot-atom local part at a hostname (no quoted local parts, no address
//! literals), and `hostname` checks label syntax and label length but not the 253-character
//! total (a warning says so).

use std::sync::OnceLock;

use super::ecma::Regex;

fn date() -> String {
    let long = "(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])";
    let short = "(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)";
    let feb = "02-(?:0[1-9]|1[0-9]|2[0-8])";
    // 29 February in years divisible by 4, except centuries not divisible by 400.
    let leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29";
    format!("(?:[0-9]{{4}}-(?:{long}|{short}|{feb})|{leap})")
}

fn time() -> String {
    let hour = "(?:[01][0-9]|2[0-3])";
    // Seconds up to 60 for leap seconds, as RFC 3339 allows.
    format!("{hour}:[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?(?:[Zz]|[+-]{hour}:[0-5][0-9])")
}

fn duration() -> String {
    // RFC 3339 appendix A.
    let second = "[0-9]+S";
    let minute = format!("[0-9]+M(?:{second})?");
    let hour = format!("[0-9]+H(?:{minute})?");
    let time = format!("T(?:{hour}|{minute}|{second})");
    let day = "[0-9]+D";
    let month = format!("[0-9]+M(?:{day})?");
    let year = format!("[0-9]+Y(?:{month})?");
    let date = format!("(?:{day}|{month}|{year})(?:{time})?");
    format!("P(?:{date}|{time}|[0-9]+W)")
}

fn ipv4() -> String {
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    format!("{octet}(?:\\.{octet}){{3}}")
}

fn ipv6() -> String {
    let h = "[0-9A-Fa-f]{1,4}";
    let ls32 = format!("(?:{h}:{h}|{})", ipv4());
    let upto = |n: usize| format!("(?:(?:{h}:){{0,{n}}}{h})?");
    // RFC 3986 IPv6address, one branch per position of "::".
    let branches = [
        format!("(?:{h}:){{6}}{ls32}"),
        format!("::(?:{h}:){{5}}{ls32}"),
        format!("(?:{h})?::(?:{h}:){{4}}{ls32}"),
        format!("{}::(?:{h}:){{3}}{ls32}", upto(1)),
        format!("{}::(?:{h}:){{2}}{ls32}", upto(2)),
        format!("{}::{h}:{ls32}", upto(3)),
        format!("{}::{ls32}", upto(4)),
        format!("{}::{h}", upto(5)),
        format!("{}::", upto(6)),
    ];
    format!("(?:{})", branches.join("|"))
}

fn hostname() -> String {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    format!("{label}(?:\\.{label})*")
}

fn email() -> String {
    let atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    format!("{atom}(?:\\.{atom})*@{}", hostname())
}

fn uuid() -> String {
    let h = "[0-9A-Fa-f]";
    format!("{h}{{8}}-{h}{{4}}-{h}{{4}}-{h}{{4}}-{h}{{12}}")
}

/// RFC 3986's `unreserved`.
const UNRESERVED: &str = "A-Za-z0-9._~\\-";

/// RFC 3987's `ucschar`: the characters beyond ASCII an IRI may hold where a URI holds
/// `unreserved` ones.
const UCSCHAR: &str = "\u{A0}-\u{D7FF}\u{F900}-\u{FDCF}\u{FDF0}-\u{FFEF}\
    \u{10000}-\u{1FFFD}\u{20000}-\u{2FFFD}\u{30000}-\u{3FFFD}\u{40000}-\u{4FFFD}\
    \u{50000}-\u{5FFFD}\u{60000}-\u{6FFFD}\u{70000}-\u{7FFFD}\u{80000}-\u{8FFFD}\
    \u{90000}-\u{9FFFD}\u{A0000}-\u{AFFFD}\u{B0000}-\u{BFFFD}\u{C0000}-\u{CFFFD}\
    \u{D0000}-\u{DFFFD}\u{E1000}-\u{EFFFD}";

/// RFC 3987's `iprivate`: private-use characters, allowed in an IRI's query.
const IPRIVATE: &str = "\u{E000}-\u{F8FF}\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}";

/// RFC 3986 pieces, (URI, relative-ref), or with `iri` RFC 3987's (IRI, irelative-ref): the
/// same grammar with `ucschar` among the unreserved characters and `iprivate` in the query.
fn uri_parts(iri: bool) -> (String, String) {
    let (wide, private) = match iri {
        true => (UCSCHAR, IPRIVATE),
        false => ("", ""),
    };
    let unreserved = format!("{UNRESERVED}{wide}");
    let sub_delims = "!$&'()*+,;=";
    let pct = "%[0-9A-Fa-f]{2}";
    let pchar = format!("(?:[{unreserved}{sub_delims}:@]|{pct})");
    let segment = format!("{pchar}*");
    let segment_nz = format!("{pchar}+");
    let segment_nz_nc = format!("(?:[{unreserved}{sub_delims}@]|{pct})+");
    let userinfo = format!("(?:[{unreserved}{sub_delims}:]|{pct})*");
    // IPvFuture stays ASCII in an IRI too.
    let ip_future = format!("v[0-9A-Fa-f]+\\.[{UNRESERVED}{sub_delims}:]+");
    // reg-name's characters include IPv4 addresses, so those need no branch of their own.
    let reg_name = format!("(?:[{unreserved}{sub_delims}]|{pct})*");
    let host = format!("(?:\\[(?:{}|{ip_future})\\]|{reg_name})", ipv6());
    let authority = format!("(?:{userinfo}@)?{host}(?::[0-9]*)?");
    let abempty = format!("(?:/{segment})*");
    let absolute = format!("/(?:{segment_nz}(?:/{segment})*)?");
    let rootless = format!("{segment_nz}(?:/{segment})*");
    let noscheme = format!("{segment_nz_nc}(?:/{segment})*");
    let query = format!("(?:\\?(?:{pchar}|[/?{private}])*)?(?:#(?:{pchar}|[/?])*)?");
    let hier = format!("(?://{authority}{abempty}|{absolute}|{rootless}|)");
    let uri = format!("[A-Za-z][A-Za-z0-9+.-]*:{hier}{query}");
    let relative = format!("(?://{authority}{abempty}|{absolute}|{noscheme}|){query}");
    (uri, relative)
}

/// RFC 6570 level 4: literals and `{op var,var:3,list*}` expressions.
fn uri_template() -> String {
    let pct = "%[0-9A-Fa-f]{2}";
    // Any character but controls, space, `"`, `'`, `%` (outside an escape), `<`, `>`, `\`,
    // `^`, backquote, `{`, `|`, `}`.
    let literal = format!("(?:[!#$&(-;=?-\\[\\]_a-z~{UCSCHAR}{IPRIVATE}]|{pct})");
    let varchar = format!("(?:[A-Za-z0-9_]|{pct})");
    let varspec = format!("{varchar}(?:\\.?{varchar})*(?::[1-9][0-9]{{0,3}}|\\*)?");
    let expression = format!("\\{{[+#./;?&=,!@|]?{varspec}(?:,{varspec})*\\}}");
    format!("(?:{literal}|{expression})*")
}

fn date_time() -> String {
    format!("{}[Tt]{}", date(), time())
}

fn uri() -> String {
    uri_parts(false).0
}

fn uri_reference() -> String {
    let (uri, relative) = uri_parts(false);
    format!("(?:{uri}|{relative})")
}

fn iri() -> String {
    uri_parts(true).0
}

fn iri_reference() -> String {
    let (iri, relative) = uri_parts(true);
    format!("(?:{iri}|{relative})")
}

fn json_pointer() -> String {
    "(?:/(?:[^/~]|~[01])*)*".to_string()
}

fn relative_json_pointer() -> String {
    format!("(?:0|[1-9][0-9]*)(?:#|{})", json_pointer())
}

/// Builds a format's regex.
type Pattern = fn() -> String;

/// The supported formats and their regexes.
const FORMATS: [(&str, Pattern); 16] = [
    ("date", date),
    ("time", time),
    ("date-time", date_time),
    ("duration", duration),
    ("email", email),
    ("hostname", hostname),
    ("ipv4", ipv4),
    ("ipv6", ipv6),
    ("uuid", uuid),
    ("uri", uri),
    ("uri-reference", uri_reference),
    ("iri", iri),
    ("iri-reference", iri_reference),
    ("uri-template", uri_template),
    ("json-pointer", json_pointer),
    ("relative-json-pointer", relative_json_pointer),
];

/// The regex of a supported format, or `None`. Each is parsed once per process: parsing
/// `date-time` cost about a tenth of compiling a schema that uses it.
pub(crate) fn format_regex(name: &str) -> Option<&'static Regex> {
    static PARSED: [OnceLock<Regex>; FORMATS.len()] = [const { OnceLock::new() }; FORMATS.len()];
    let i = FORMATS.iter().position(|&(f, _)| f == name)?;
    // Cannot fail: the format regexes are formwork's own (`formats` in tests/json_schema.rs
    // compiles each).
    let parse = || Regex::whole(&FORMATS[i].1()).expect("format regexes parse");
    Some(PARSED[i].get_or_init(parse))
}

/// Formats the specification defines that formwork cannot express exactly: an error (or, with
/// `lenient`, a warning). Any other unknown format is an annotation and is ignored with a warning.
pub(crate) fn is_spec_format(name: &str) -> bool {
    matches!(name, "idn-email" | "idn-hostname" | "regex")
}

/// A warning to attach when the format is only approximated.
pub(crate) fn approximation(name: &str) -> Option<&'static str> {
    (name == "hostname")
        .then_some("format \"hostname\": the 253-character total length is not enforced")
}
