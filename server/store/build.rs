//! The migrations are embedded at compile time (`sqlx::migrate!`); without this, adding a
//! migration file would not rebuild the crate and the new migration would silently not run.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
