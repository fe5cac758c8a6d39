use breaker::circuit_breaker;

#[circuit_breaker(threshold = 5)]
async fn ids() -> std::io::Result<impl Iterator<Item = u32>> {
    Ok(0..3)
}

fn main() {}
