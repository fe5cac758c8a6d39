use breaker::circuit_breaker;

#[derive(Debug)]
pub struct MyError;

pub trait Store {
    #[circuit_breaker(threshold = 5)]
    async fn get(&self) -> Result<u32, MyError>;
}

fn main() {}
