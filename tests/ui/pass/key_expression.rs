//! `key = ..` takes an expression over the arguments and `self`: a field, a method call, a
//! field of an argument, a call. An argument used only as the key counts as used (no
//! `unused_variables`), with and without retry.
#![deny(warnings)]

use breaker::circuit_breaker;

#[derive(Debug)]
pub struct Down;

pub struct Client {
    base: String,
}

impl Client {
    fn host(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    #[circuit_breaker(threshold = 1, key = self.base)]
    pub async fn by_field(&self, fail: bool) -> Result<u32, Down> {
        if fail {
            Err(Down)
        } else {
            Ok(1)
        }
    }

    #[circuit_breaker(threshold = 1, retry = "2x", key = self.host())]
    pub async fn by_method(&self, fail: bool) -> Result<u32, Down> {
        if fail {
            Err(Down)
        } else {
            Ok(2)
        }
    }
}

pub struct Request {
    pub tenant: String,
}

#[circuit_breaker(threshold = 1, key = req.tenant)]
async fn by_argument_field(req: &Request) -> Result<u32, Down> {
    Ok(3)
}

#[circuit_breaker(threshold = 1, retry = "2x", key = host)]
async fn key_only(host: &str, id: u32) -> Result<u32, Down> {
    Ok(id)
}

#[circuit_breaker(threshold = 1, key = format!("{region}/{zone}"))]
async fn by_call(region: &str, zone: u32) -> Result<u32, Down> {
    Ok(zone)
}

pub fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let a = Client {
            base: "http://a".into(),
        };
        let b = Client {
            base: "http://b".into(),
        };
        assert!(matches!(
            a.by_field(true).await,
            Err(breaker::Error::Inner(Down))
        ));
        // `a`'s breaker is open; `b`'s is its own.
        assert!(matches!(
            a.by_field(false).await,
            Err(breaker::Error::Rejected(_))
        ));
        assert_eq!(b.by_field(false).await.unwrap(), 1);
        assert!(b.by_method(true).await.is_err());
        assert!(matches!(
            b.by_method(false).await,
            Err(breaker::Error::Rejected(_))
        ));
        assert_eq!(a.by_method(false).await.unwrap(), 2);
        let req = Request {
            tenant: "acme".into(),
        };
        assert_eq!(by_argument_field(&req).await.unwrap(), 3);
        assert_eq!(key_only("h", 4).await.unwrap(), 4);
        assert_eq!(by_call("eu", 5).await.unwrap(), 5);
    });
}
