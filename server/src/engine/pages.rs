//! Pages of a list: at most a number of items, and never more bytes than one response may carry.
//!
//! Every list a client can ask for is answered a page at a time. The page token is the key of
//! the last item sent (opaque to clients), so a page picks up after it even when items were added
//! meanwhile; a page also stops before its payloads would pass the response size limit, so a
//! list of large values can always be read — at worst one item per page.

use base64::Engine as _;

use super::{EngineError, EngineResult, ErrorCode};

/// What a client asked for: `size` 0 takes as many as fit (up to `most`).
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub size: i32,
    pub token: String,
}

/// One page and the token of the next (empty on the last).
#[derive(Debug)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_token: String,
}

fn bad_token() -> EngineError {
    EngineError::new(
        ErrorCode::InvalidArgument,
        "INVALID_PAGE_TOKEN",
        "page_token is not one this server issued",
    )
}

pub(crate) fn encode_token(key: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(key)
}

pub(crate) fn decode_token(token: &str) -> EngineResult<String> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad_token())?;
    String::from_utf8(raw).map_err(|_| bad_token())
}

/// The page of `items` after `req.token`, in the order of `key` (keys are unique and sort as the
/// list should), holding at most `req.size` (1..=`most`, `most` when 0) items and, past the
/// first, no more than `budget` bytes by `bytes`.
pub fn page<T>(
    mut items: Vec<T>,
    key: impl Fn(&T) -> String,
    bytes: impl Fn(&T) -> usize,
    req: &PageRequest,
    most: usize,
    budget: usize,
) -> EngineResult<Page<T>> {
    let size = page_size(req.size, most, most)?;
    let after = if req.token.is_empty() {
        None
    } else {
        Some(decode_token(&req.token)?)
    };
    items.sort_by_key(|a| key(a));
    let mut rest = items
        .into_iter()
        .filter(|i| after.as_ref().is_none_or(|a| key(i) > *a))
        .peekable();
    let (mut taken, mut used) = (Vec::new(), 0usize);
    while let Some(next) = rest.peek() {
        let b = bytes(next);
        if taken.len() == size || (!taken.is_empty() && used + b > budget) {
            break;
        }
        used += b;
        taken.push(rest.next().expect("peeked"));
    }
    let next_token = match (rest.peek(), taken.last()) {
        (Some(_), Some(last)) => encode_token(&key(last)),
        _ => String::new(),
    };
    Ok(Page {
        items: taken,
        next_token,
    })
}

/// The number of items a page holds when `asked` for: `default` for 0, at most `most`.
pub fn page_size(asked: i32, default: usize, most: usize) -> EngineResult<usize> {
    match asked {
        n if n < 0 => Err(EngineError::invalid("page_size must not be negative")),
        0 => Ok(default),
        n => Ok((n as usize).min(most)),
    }
}

/// A sort key for a number, so that text order is numeric order.
pub fn numeric_key(n: u64) -> String {
    format!("{n:020}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(size: i32, token: &str) -> PageRequest {
        PageRequest {
            size,
            token: token.into(),
        }
    }

    fn all_pages(items: Vec<(u64, usize)>, size: i32, budget: usize) -> Vec<Vec<u64>> {
        let mut pages = Vec::new();
        let mut token = String::new();
        loop {
            let p = page(
                items.clone(),
                |i| numeric_key(i.0),
                |i| i.1,
                &req(size, &token),
                1_000,
                budget,
            )
            .unwrap();
            pages.push(p.items.iter().map(|i| i.0).collect());
            if p.next_token.is_empty() {
                return pages;
            }
            token = p.next_token;
        }
    }

    #[test]
    fn pages_by_count_in_key_order_and_ends_with_an_empty_token() {
        let items: Vec<(u64, usize)> = [5, 1, 9, 3, 7].iter().map(|n| (*n, 1)).collect();
        assert_eq!(all_pages(items, 2, 1_000), [vec![1, 3], vec![5, 7], vec![9]]);
    }

    #[test]
    fn a_page_stops_before_its_byte_budget_but_always_carries_one() {
        let items = vec![(1, 60), (2, 60), (3, 200), (4, 10)];
        // 100 bytes a page: the first two do not fit together, the 200-byte one goes alone.
        assert_eq!(all_pages(items, 0, 100), [vec![1], vec![2], vec![3], vec![4]]);
        let small = vec![(1, 10), (2, 10), (3, 10)];
        assert_eq!(all_pages(small, 0, 100), [vec![1, 2, 3]]);
    }

    #[test]
    fn a_token_continues_after_its_key_even_when_items_were_added() {
        let first = page(
            vec![(1u64, 1usize), (2, 1), (3, 1)],
            |i| numeric_key(i.0),
            |i| i.1,
            &req(2, ""),
            10,
            100,
        )
        .unwrap();
        // An item sorting before the token's key appeared meanwhile: not sent again, not skipped.
        let next = page(
            vec![(0, 1), (1, 1), (2, 1), (3, 1)],
            |i| numeric_key(i.0),
            |i| i.1,
            &req(2, &first.next_token),
            10,
            100,
        )
        .unwrap();
        assert_eq!(next.items.iter().map(|i| i.0).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn bad_tokens_and_sizes_are_invalid_argument() {
        let e = page(vec![1u64], |i| numeric_key(*i), |_| 1, &req(0, "!!!"), 10, 10).unwrap_err();
        assert_eq!(e.reason, "INVALID_PAGE_TOKEN");
        let e = page(vec![1u64], |i| numeric_key(*i), |_| 1, &req(-1, ""), 10, 10).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument);
    }
}
