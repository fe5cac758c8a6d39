use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

pub struct Connection;

#[circuit_breaker(retry = "3x")]
async fn fetch(conn: Connection, id: u64) -> Result<u32, MyError> {
    let _ = (conn, id);
    Ok(1)
}

fn main() {}
