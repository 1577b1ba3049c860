//! Seeded random draws for Thompson sampling: a SplitMix64 generator and
//! Beta draws through two Gamma draws (Marsaglia and Tsang, 2000).
//!
//! Written here rather than taken from `rand_distr` because `[router] seed`
//! promises the same choices for the same seed, and `rand_distr` does not
//! promise the same stream across its versions; the algorithms are short
//! and tested below against the Beta's mean and variance.

/// SplitMix64 (Steele, Lea and Flood): small, fast, and good enough to
/// drive sampling; not for secrets.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator that always gives the same stream for `seed`.
    pub fn seeded(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from the operating system (a fixed seed if that
    /// fails: sampling stays correct, only less varied between starts).
    pub fn from_entropy() -> Self {
        let mut bytes = [0u8; 8];
        let seed = match getrandom::fill(&mut bytes) {
            Ok(()) => u64::from_le_bytes(bytes),
            Err(_) => 0x5eed,
        };
        Self(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1): never exactly 0, so its logarithm is finite.
    fn unit(&mut self) -> f64 {
        // 53 random bits, shifted off zero by half a step.
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller; the second value is not kept).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Gamma(shape, 1) for `shape > 0`.
    fn gamma(&mut self, shape: f64) -> f64 {
        if shape < 1.0 {
            // Gamma(a) = Gamma(a + 1) * U^(1/a).
            return self.gamma(shape + 1.0) * self.unit().powf(1.0 / shape);
        }
        let d = shape - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = 1.0 + c * x;
            if v <= 0.0 {
                continue;
            }
            let v = v * v * v;
            let u = self.unit();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v;
            }
        }
    }

    /// A draw from Beta(alpha, beta); both must be positive.
    pub fn beta(&mut self, alpha: f64, beta: f64) -> f64 {
        let x = self.gamma(alpha);
        let y = self.gamma(beta);
        if x + y > 0.0 { x / (x + y) } else { 0.5 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(rng: &mut Rng, a: f64, b: f64, n: usize) -> (f64, f64) {
        let draws: Vec<f64> = (0..n).map(|_| rng.beta(a, b)).collect();
        let mean = draws.iter().sum::<f64>() / n as f64;
        let var = draws.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        (mean, var)
    }

    #[test]
    fn beta_draws_have_the_beta_mean_and_variance() {
        let mut rng = Rng::seeded(42);
        for (a, b) in [
            (1.0, 1.0),
            (2.0, 8.0),
            (41.0, 11.0),
            (0.5, 0.5),
            (1.0, 161.0),
        ] {
            let (mean, var) = moments(&mut rng, a, b, 40_000);
            let want_mean = a / (a + b);
            let want_var = a * b / ((a + b).powi(2) * (a + b + 1.0));
            assert!(
                (mean - want_mean).abs() < 0.01,
                "{a},{b}: mean {mean} vs {want_mean}"
            );
            assert!(
                (var - want_var).abs() < 0.1 * want_var + 1e-4,
                "{a},{b}: variance {var} vs {want_var}"
            );
        }
    }

    #[test]
    fn draws_stay_in_the_unit_interval() {
        let mut rng = Rng::seeded(1);
        for _ in 0..10_000 {
            let x = rng.beta(0.3, 200.0);
            assert!((0.0..=1.0).contains(&x), "{x}");
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let (mut a, mut b) = (Rng::seeded(9), Rng::seeded(9));
        let xs: Vec<f64> = (0..5).map(|_| a.beta(2.0, 3.0)).collect();
        let ys: Vec<f64> = (0..5).map(|_| b.beta(2.0, 3.0)).collect();
        assert_eq!(xs, ys);
        let mut c = Rng::seeded(10);
        assert_ne!(xs[0], c.beta(2.0, 3.0));
    }
}
