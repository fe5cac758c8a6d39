use breaker::circuit_breaker;

pub type Count = u32;

#[circuit_breaker(threshold = 5)]
async fn fetch() -> Count {
    1
}

fn main() {}
