//! `#[derive(Options)]` and `#[derive(Choice)]` for dnsluice module options;
//! see the `dnsluice-options` crate for what they generate and why.

#![warn(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as Tokens;
use quote::quote;
use syn::{
    parse_macro_input, Attribute, Data, DeriveInput, Expr, ExprLit, ExprRange, Fields,
    GenericArgument, Lit, LitStr, PathArguments, RangeLimits, Type,
};

/// Derives `dnsluice_options::Options` for a struct with named fields; every
/// field needs a doc comment (it is the option's documentation).
#[proc_macro_derive(Options, attributes(option, options))]
pub fn derive_options(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    options_impl(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// Derives `dnsluice_options::ChoiceValue`, `OptionValue`, `FromStr` and
/// `Display` for an enum of unit variants, each with a doc comment.
#[proc_macro_derive(Choice, attributes(choice))]
pub fn derive_choice(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    choice_impl(&input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A doc comment split into its first paragraph (one line) and the rest.
struct Docs {
    help: String,
    details: String,
}

fn docs_of(attrs: &[Attribute]) -> Docs {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta {
            if let Expr::Lit(ExprLit {
                lit: Lit::Str(text),
                ..
            }) = &nv.value
            {
                let line = text.value();
                lines.push(
                    line.strip_prefix(' ')
                        .unwrap_or(&line)
                        .trim_end()
                        .to_string(),
                );
            }
        }
    }
    let mut paragraphs = lines.split(|l| l.is_empty()).filter(|p| !p.is_empty());
    let help = paragraphs
        .next()
        .map(|p| p.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let details = paragraphs
        .map(|p| p.join("\n"))
        .collect::<Vec<_>>()
        .join("\n\n");
    Docs { help, details }
}

/// The `T` of `Option<T>`, when `ty` is one.
fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Option" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.first()? {
        GenericArgument::Type(inner) => Some(inner),
        _ => None,
    }
}

enum Default {
    Required,
    Trait,
    Value(Expr),
}

struct Field {
    ident: syn::Ident,
    ty: Type,
    key: String,
    default: Default,
    flatten: bool,
    range: Option<(Expr, Expr)>,
    flag_aliases: Vec<String>,
    docs: Docs,
}

fn parse_field(field: &syn::Field) -> syn::Result<Field> {
    let ident = field.ident.clone().expect("named fields");
    let mut parsed = Field {
        key: ident.to_string().trim_start_matches("r#").to_string(),
        ident,
        ty: field.ty.clone(),
        default: Default::Required,
        flatten: false,
        range: None,
        flag_aliases: Vec::new(),
        docs: docs_of(&field.attrs),
    };
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("option")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("default") {
                parsed.default = if meta.input.peek(syn::Token![=]) {
                    Default::Value(meta.value()?.parse()?)
                } else {
                    Default::Trait
                };
            } else if meta.path.is_ident("rename") {
                parsed.key = meta.value()?.parse::<LitStr>()?.value();
            } else if meta.path.is_ident("flag_alias") {
                parsed
                    .flag_aliases
                    .push(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("flatten") {
                parsed.flatten = true;
            } else if meta.path.is_ident("range") {
                let range: ExprRange = meta.value()?.parse()?;
                let (Some(low), Some(high), RangeLimits::Closed(_)) =
                    (range.start, range.end, range.limits)
                else {
                    return Err(meta.error("write the range as LOW..=HIGH"));
                };
                // `1..=(1 << 20)`: the parentheses are for the reader, not the code.
                let bare = |e: Expr| match e {
                    Expr::Paren(p) => *p.expr,
                    other => other,
                };
                parsed.range = Some((bare(*low), bare(*high)));
            } else {
                return Err(meta.error("expected default, rename, range, flag_alias or flatten"));
            }
            Ok(())
        })?;
    }
    if !parsed.flatten && parsed.docs.help.is_empty() {
        return Err(syn::Error::new_spanned(
            &field.ident,
            "document every option: its doc comment is its documentation",
        ));
    }
    Ok(parsed)
}

fn options_impl(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            input,
            "Options is derived for structs",
        ));
    };
    let Fields::Named(named) = &data.fields else {
        return Err(syn::Error::new_spanned(input, "Options needs named fields"));
    };
    let fields = named
        .named
        .iter()
        .map(parse_field)
        .collect::<syn::Result<Vec<_>>>()?;
    let krate = quote!(::dnsluice_options);
    let mut describe = Vec::new();
    let mut take = Vec::new();
    for f in &fields {
        let ident = &f.ident;
        let ty = &f.ty;
        if f.flatten {
            describe.push(quote!(<#ty as #krate::Options>::describe(docs);));
            take.push(quote!(#ident: <#ty as #krate::Options>::take_from(table)?,));
            continue;
        }
        let key = &f.key;
        let help = &f.docs.help;
        let details = &f.docs.details;
        let aliases = &f.flag_aliases;
        let inner = option_inner(ty);
        // The type a present key is read as (an Option field reads its inner type).
        let value_ty = inner.unwrap_or(ty);
        let default_doc = match (&f.default, inner) {
            (Default::Required, None) => quote!(#krate::DefaultDoc::Required),
            (Default::Required, Some(_)) => quote!(#krate::DefaultDoc::Unset),
            (Default::Trait, _) => quote!({
                let value: #ty = ::core::default::Default::default();
                match #krate::OptionValue::to_toml(&value) {
                    Some(v) => #krate::DefaultDoc::Value(v),
                    None => #krate::DefaultDoc::Unset,
                }
            }),
            (Default::Value(expr), _) => quote!({
                let value: #ty = #expr;
                match #krate::OptionValue::to_toml(&value) {
                    Some(v) => #krate::DefaultDoc::Value(v),
                    None => #krate::DefaultDoc::Unset,
                }
            }),
        };
        let range_doc = match &f.range {
            None => quote!(None),
            Some((low, high)) => quote!({
                let low: #value_ty = #low;
                let high: #value_ty = #high;
                match (#krate::OptionValue::to_toml(&low), #krate::OptionValue::to_toml(&high)) {
                    (Some(low), Some(high)) => Some((low, high)),
                    _ => None,
                }
            }),
        };
        describe.push(quote! {
            docs.push(#krate::OptionDoc {
                key: #key,
                shape: <#value_ty as #krate::OptionValue>::shape(),
                default: #default_doc,
                help: #help,
                details: #details,
                range: #range_doc,
                flag_aliases: &[#(#aliases),*],
            });
        });
        let fallback = match (&f.default, inner) {
            (Default::Required, None) => quote!(
                return Err(#krate::OptionError::at(#key, "is required"))
            ),
            (Default::Required, Some(_)) => quote!(None),
            (Default::Trait, _) => quote!(::core::default::Default::default()),
            (Default::Value(expr), _) => quote!(#expr),
        };
        let present = if inner.is_some() {
            quote!(Some(value))
        } else {
            quote!(value)
        };
        let check = match &f.range {
            None => quote!(),
            Some((low, high)) => {
                let check_one = quote!(#krate::check_range(#key, value, #low, #high)?;);
                if inner.is_some() {
                    quote!(if let Some(value) = &#ident { #check_one })
                } else {
                    quote!({ let value = &#ident; #check_one })
                }
            }
        };
        take.push(quote! {
            #ident: {
                let #ident: #ty = match table.take::<#value_ty>(#key)? {
                    Some(value) => #present,
                    None => #fallback,
                };
                #check
                #ident
            },
        });
    }
    // `#[options(hint(key = "message"))]`: what to say when `key` is given
    // to a struct that does not take it (a key of a related module).
    let mut hints = Vec::new();
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("options")) {
        attr.parse_nested_meta(|meta| {
            if !meta.path.is_ident("hint") {
                return Err(meta.error("expected hint(key = \"message\")"));
            }
            meta.parse_nested_meta(|hint| {
                let key = hint
                    .path
                    .get_ident()
                    .ok_or_else(|| hint.error("expected a key"))?
                    .to_string();
                let message: LitStr = hint.value()?.parse()?;
                hints.push(quote!(#key => Some(#message)));
                Ok(())
            })
        })?;
    }
    let hint_fn = if hints.is_empty() {
        quote!()
    } else {
        quote! {
            fn hint(key: &str) -> Option<&'static str> {
                match key {
                    #(#hints,)*
                    _ => None,
                }
            }
        }
    };
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics #krate::Options for #name #ty_generics #where_clause {
            fn describe(docs: &mut ::std::vec::Vec<#krate::OptionDoc>) {
                #(#describe)*
            }
            fn take_from(
                table: &mut #krate::OptionTable,
            ) -> ::core::result::Result<Self, #krate::OptionError> {
                Ok(Self { #(#take)* })
            }
            #hint_fn
        }
    })
}

/// `RoundRobin` → `round-robin`.
fn kebab(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn choice_impl(input: &DeriveInput) -> syn::Result<Tokens> {
    let Data::Enum(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            input,
            "Choice is derived for enums",
        ));
    };
    let krate = quote!(::dnsluice_options);
    let name = &input.ident;
    let mut all = Vec::new();
    let mut aliases = Vec::new();
    let mut names = Vec::new();
    let mut docs = Vec::new();
    for variant in &data.variants {
        if !matches!(variant.fields, Fields::Unit) {
            return Err(syn::Error::new_spanned(
                variant,
                "Choice variants have no fields",
            ));
        }
        let mut text = kebab(&variant.ident.to_string());
        for attr in variant.attrs.iter().filter(|a| a.path().is_ident("choice")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("name") {
                    text = meta.value()?.parse::<LitStr>()?.value();
                    Ok(())
                } else if meta.path.is_ident("alias") {
                    let alias = meta.value()?.parse::<LitStr>()?.value();
                    let ident = &variant.ident;
                    aliases.push(quote!((#name::#ident, #alias)));
                    Ok(())
                } else {
                    Err(meta.error("expected name = \"...\" or alias = \"...\""))
                }
            })?;
        }
        let help = docs_of(&variant.attrs).help;
        if help.is_empty() {
            return Err(syn::Error::new_spanned(
                &variant.ident,
                "document every choice: its doc comment is its documentation",
            ));
        }
        let ident = &variant.ident;
        all.push(quote!((#name::#ident, #text)));
        names.push(quote!(#name::#ident => #text));
        docs.push(quote!(#krate::ChoiceDoc { name: #text, help: #help }));
    }
    Ok(quote! {
        impl #krate::ChoiceValue for #name {
            const ALL: &'static [(Self, &'static str)] = &[#(#all),*];
            const ALIASES: &'static [(Self, &'static str)] = &[#(#aliases),*];
            fn name(self) -> &'static str {
                match self { #(#names),* }
            }
        }
        impl #krate::OptionValue for #name {
            fn shape() -> #krate::Shape {
                #krate::Shape::Choice(::std::vec![#(#docs),*])
            }
            fn from_toml(value: #krate::toml::Value) -> ::core::result::Result<Self, ::std::string::String> {
                match value {
                    #krate::toml::Value::String(text) => <Self as #krate::ChoiceValue>::parse_name(&text),
                    other => Err(::std::format!(
                        "expected one of {}, found {}",
                        <Self as #krate::ChoiceValue>::ALL.iter().map(|(_, n)| *n).collect::<::std::vec::Vec<_>>().join(", "),
                        other.type_str()
                    )),
                }
            }
            fn to_toml(&self) -> ::core::option::Option<#krate::toml::Value> {
                Some(#krate::toml::Value::String(
                    <Self as #krate::ChoiceValue>::name(*self).to_string(),
                ))
            }
        }
        impl ::core::str::FromStr for #name {
            type Err = ::std::string::String;
            fn from_str(text: &str) -> ::core::result::Result<Self, Self::Err> {
                <Self as #krate::ChoiceValue>::parse_name(text)
            }
        }
        impl ::core::fmt::Display for #name {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(<Self as #krate::ChoiceValue>::name(*self))
            }
        }
    })
}
