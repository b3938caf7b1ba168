/// Lets a bound value tell a `nil` apart from a value, whatever the wrapped type, so both engines can write
/// binds without going through `Encodable`. A `nil` still knows its wrapped type, which PostgreSQL needs to
/// declare the parameter's type.
protocol OptionalBind {
    var isNone: Bool { get }
    var wrappedType: Any.Type { get }
}

extension Optional: OptionalBind {
    var isNone: Bool { self == nil }
    var wrappedType: Any.Type { Wrapped.self }
}
