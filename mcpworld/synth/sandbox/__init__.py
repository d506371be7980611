"""Running untrusted code contained: resource-limited worker processes (`worker`, whose zygote program is
`zygote`), the trusted job entry points they run (`jobs`), and the host side of code that lives in a worker:
tools whose typed signatures are rebuilt from JSON Schema (`signatures`) and synthesized world packages served
through workers (`packages`). Nothing here imports generated code into the caller's interpreter.
"""
