//! Lists the server answers a page at a time, read to the end.

use std::future::Future;

use crate::Error;

/// Calls `fetch` with each page token in turn (empty for the first page) until the server says
/// there is no next page; `fetch` returns a page's items and its next token.
pub(crate) async fn read_all<T, F, Fut>(mut fetch: F) -> Result<Vec<T>, Error>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String), Error>>,
{
    let mut all = Vec::new();
    let mut token = String::new();
    loop {
        let (items, next) = fetch(token).await?;
        all.extend(items);
        if next.is_empty() {
            return Ok(all);
        }
        token = next;
    }
}
