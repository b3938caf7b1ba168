/// A short random id that makes walker ids and idempotency keys new on every run.
enum BenchRunID {
    static func make() -> String {
        String(UInt32.random(in: .min ... .max), radix: 16)
    }
}
