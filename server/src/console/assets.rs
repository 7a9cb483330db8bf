//! The console's files, embedded at build time (`server/build.rs` reads `server/assets/console/`), each
//! compressed once with gzip for browsers that take it. Every GET is answered from here: a file
//! by its name (`/app.js`), and `index.html` for any path that names no file, so the app's own
//! routes (`/ns/default/workflows/abc`) load it.
//!
//! Headers: a content security policy that lets the page load only its own files and talk only
//! to its own origin (no inline script, no framing), `no-cache` with an ETag (a new binary's
//! files are fetched at once, an unchanged one costs a 304), and `nosniff`.

use std::sync::LazyLock;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use sha2::Digest;

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));
}

/// A file of the console.
pub struct Asset {
    pub name: &'static str,
    pub body: Bytes,
    /// The same, gzip-compressed.
    pub gzip: Bytes,
    pub content_type: &'static str,
    pub etag: HeaderValue,
}

/// The files, compressed on first use.
pub static ASSETS: LazyLock<Vec<Asset>> = LazyLock::new(|| {
    embedded::FILES
        .iter()
        .map(|(name, bytes)| {
            let digest = sha2::Sha256::digest(bytes);
            Asset {
                name,
                body: Bytes::from_static(bytes),
                gzip: gzip(bytes).into(),
                content_type: content_type(name),
                etag: HeaderValue::from_str(&format!("\"{}\"", hex::encode(&digest[..12]))).expect("hex is a header"),
            }
        })
        .collect()
});

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

/// Shown when the binary was built without `server/assets/console/`.
const NOT_BUILT: &str = "<!doctype html><title>Waymark</title><p>This server was built without its console \
     (server/assets/console was missing): run <code>make -C console build</code> and build the server again.";

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).expect("writing to memory");
    enc.finish().expect("writing to memory")
}

fn content_type(name: &str) -> &'static str {
    match name.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("ico") => "image/x-icon",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The file a path asks for: a file by its name; nothing for an unknown file (the files sit
/// at the root, and have dots: `/app.js`); `index.html` for any other path, a route of the app
/// (`/ns/default/workflows/order.7` — ids may have dots).
pub fn lookup(path: &str) -> Option<&'static Asset> {
    let name = path.trim_start_matches('/');
    if let Some(a) = ASSETS.iter().find(|a| a.name == name) {
        return Some(a);
    }
    if !name.contains('/') && name.contains('.') {
        return None;
    }
    ASSETS.iter().find(|a| a.name == "index.html")
}

/// Total bytes of the files, as sent compressed.
pub fn gzip_total() -> usize {
    ASSETS.iter().map(|a| a.gzip.len()).sum()
}

/// Answers a GET or HEAD.
pub fn answer<B>(req: &Request<B>) -> Response<Bytes> {
    let head = req.method() == Method::HEAD;
    let Some(asset) = lookup(req.uri().path()) else {
        if ASSETS.is_empty() {
            return plain(StatusCode::NOT_FOUND, "text/html; charset=utf-8", NOT_BUILT);
        }
        return plain(StatusCode::NOT_FOUND, "text/plain; charset=utf-8", "not found\n");
    };
    let mut r = Response::builder()
        .header(header::CONTENT_TYPE, asset.content_type)
        .header(header::CACHE_CONTROL, "no-cache")
        .header(header::ETAG, asset.etag.clone())
        .header(header::VARY, "accept-encoding");
    r = secure(r);
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == asset.etag.as_bytes());
    if fresh {
        return r.status(StatusCode::NOT_MODIFIED).body(Bytes::new()).expect("valid");
    }
    let gzip = req
        .headers()
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.trim().split(';').next() == Some("gzip")));
    let body = if gzip {
        r = r.header(header::CONTENT_ENCODING, "gzip");
        asset.gzip.clone()
    } else {
        asset.body.clone()
    };
    r = r.header(header::CONTENT_LENGTH, body.len());
    r.body(if head { Bytes::new() } else { body }).expect("valid")
}

/// The headers every answer of the console carries.
pub fn secure(r: http::response::Builder) -> http::response::Builder {
    r.header(header::CONTENT_SECURITY_POLICY, CSP)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .header(header::X_FRAME_OPTIONS, "DENY")
}

/// A short answer that is not a file.
pub fn plain(status: StatusCode, content_type: &'static str, text: &'static str) -> Response<Bytes> {
    secure(Response::builder())
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Bytes::from_static(text.as_bytes()))
        .expect("valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, headers: &[(&str, &str)]) -> Response<Bytes> {
        let mut b = Request::builder().uri(path);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        answer(&b.body(()).unwrap())
    }

    #[test]
    fn routes_load_the_app_and_unknown_files_are_not_found() {
        // server/assets/console is committed: a build without it is a broken checkout.
        assert!(
            ASSETS.iter().any(|a| a.name == "index.html"),
            "server/assets/console/index.html is embedded"
        );
        assert!(ASSETS.iter().any(|a| a.name.ends_with(".js")));
        let index = get("/", &[]);
        assert_eq!(index.status(), StatusCode::OK);
        assert!(index.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html"));
        assert!(index.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .contains("script-src 'self'"));
        let route = get("/ns/default/workflows/order-7", &[]);
        assert_eq!(route.body(), index.body());
        let dotted = get("/ns/default/workflows/order.7", &[]);
        assert_eq!(dotted.body(), index.body(), "a route whose id has a dot is the app");
        assert_eq!(get("/nothing-here.js", &[]).status(), StatusCode::NOT_FOUND);
        // Nothing is ever read from disk: a path that climbs gets the app, like any route.
        assert_eq!(get("/../Cargo.toml", &[]).body(), index.body());
    }

    #[test]
    fn files_come_compressed_and_revalidate_with_their_etag() {
        let index = ASSETS
            .iter()
            .find(|a| a.name == "index.html")
            .expect("index.html is embedded");
        let plain = get("/index.html", &[]);
        assert_eq!(plain.body(), &index.body);
        let zipped = get("/index.html", &[("accept-encoding", "br, gzip;q=0.8")]);
        assert_eq!(zipped.headers()[header::CONTENT_ENCODING], "gzip");
        let mut unzipped = Vec::new();
        use std::io::Read;
        flate2::read::GzDecoder::new(&zipped.body()[..])
            .read_to_end(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, index.body);
        let etag = plain.headers()[header::ETAG].to_str().unwrap().to_string();
        let again = get("/index.html", &[("if-none-match", &etag)]);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert!(again.body().is_empty());
    }
}
