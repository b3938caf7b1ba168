/// Lets a bound value tell a `nil` apart from a value, whatever the wrapped type, so both engines can write
/// binds without going through `Encodable`.
protocol OptionalBind {
    var isNone: Bool { get }
}

extension Optional: OptionalBind {
    var isNone: Bool { self == nil }
}
