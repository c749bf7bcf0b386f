//! `usage.prices`: what a person says a model's tokens cost, per million input, cached input and
//! output tokens. spex ships no price list (one that goes stale is worse than none); without
//! this key `spex usage` shows no cost.

use std::collections::BTreeMap;

use jsonc_parser::ast::Value as Ast;
use jsonc_parser::common::Ranged;

use super::jsonc::name_of;

/// Where the `usage` key is wrong (a byte offset into the file), what, and what to write.
#[derive(Debug)]
pub struct Bad {
    pub at: usize,
    pub message: String,
    pub hint: String,
}

fn bad(at: usize, message: impl Into<String>, hint: impl Into<String>) -> Bad {
    Bad {
        at,
        message: message.into(),
        hint: hint.into(),
    }
}

/// A model's prices, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Price {
    /// Input tokens not read from a cache (cache writes included).
    pub input: f64,
    /// Input tokens read from a cache (`input` when not set).
    pub cached: f64,
    pub output: f64,
}

/// Prices by model name; a name ending in `*` prices every model it starts (the longest such
/// prefix wins, an exact name first).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Prices(pub BTreeMap<String, Price>);

impl Prices {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The price of `model`, when one is set.
    pub fn of(&self, model: &str) -> Option<Price> {
        if let Some(p) = self.0.get(model) {
            return Some(*p);
        }
        self.0
            .iter()
            .filter_map(|(k, p)| Some((k.strip_suffix('*')?, p)))
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| *p)
    }
}

// Prices are finite numbers (the parser takes no other), so equality is an equivalence.
impl Eq for Price {}

impl Price {
    /// The cost of these counts (`input` counts every input token, `cached` the part of them
    /// read from a cache).
    pub fn cost(&self, input: u64, cached: u64, output: u64) -> f64 {
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts far below 2^52, and a cost is shown to the cent"
        )]
        let n = |v: u64| v as f64;
        (n(input.saturating_sub(cached)) * self.input
            + n(cached) * self.cached
            + n(output) * self.output)
            / 1e6
    }
}

const HINT: &str = "e.g. \"usage\": {\"prices\": {\"gpt-5.4\": {\"input\": 1.25, \"cached\": 0.125, \"output\": 10}}} (US dollars, or any unit, per million tokens)";

/// The `usage` key: `prices`.
pub fn apply_usage(prices: &mut Prices, v: &Ast) -> Result<(), Bad> {
    let Ast::Object(fields) = v else {
        return Err(bad(
            v.start(),
            "`usage` must be an object",
            "keys: `prices`",
        ));
    };
    for f in &fields.properties {
        let fk = name_of(&f.name);
        if fk != "prices" {
            return Err(bad(
                f.start(),
                format!("unknown key `usage.{fk}`"),
                "keys: `prices`",
            ));
        }
        let Ast::Object(models) = &f.value else {
            return Err(bad(
                f.value.start(),
                "`usage.prices` must be an object of models",
                HINT,
            ));
        };
        for m in &models.properties {
            let model = name_of(&m.name);
            let price = price(&m.value, &model)?;
            prices.0.insert(model, price);
        }
    }
    Ok(())
}

fn price(v: &Ast, model: &str) -> Result<Price, Bad> {
    let Ast::Object(fields) = v else {
        return Err(bad(
            v.start(),
            format!("`usage.prices.{model}` must be an object"),
            HINT,
        ));
    };
    let (mut input, mut cached, mut output) = (None, None, None);
    for f in &fields.properties {
        let fk = name_of(&f.name);
        let slot = match fk.as_str() {
            "input" => &mut input,
            "cached" => &mut cached,
            "output" => &mut output,
            other => {
                return Err(bad(
                    f.start(),
                    format!("unknown key `usage.prices.{model}.{other}`"),
                    "keys: `input`, `cached`, `output`",
                ));
            }
        };
        let n = match &f.value {
            Ast::NumberLit(n) => n.value.parse::<f64>().ok(),
            _ => None,
        };
        *slot = Some(n.filter(|n| n.is_finite() && *n >= 0.0).ok_or_else(|| {
            bad(
                f.value.start(),
                format!("`usage.prices.{model}.{fk}` must be a number, 0 or more"),
                HINT,
            )
        })?);
    }
    let (Some(input), Some(output)) = (input, output) else {
        return Err(bad(
            v.start(),
            format!("`usage.prices.{model}` needs `input` and `output`"),
            HINT,
        ));
    };
    Ok(Price {
        input,
        cached: cached.unwrap_or(input),
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_name_then_the_longest_prefix_prices_a_model() {
        let p = |input| Price {
            input,
            cached: input,
            output: 0.0,
        };
        let prices = Prices(
            [
                ("gpt-*", p(1.0)),
                ("gpt-5*", p(2.0)),
                ("gpt-5-mini", p(3.0)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        );
        assert_eq!(prices.of("gpt-5-mini"), Some(p(3.0)));
        assert_eq!(prices.of("gpt-5.4"), Some(p(2.0)));
        assert_eq!(prices.of("gpt-4o"), Some(p(1.0)));
        assert_eq!(prices.of("other-model"), None);
        let cost = Price {
            input: 3.0,
            cached: 0.3,
            output: 15.0,
        }
        .cost(1_000_000, 400_000, 100_000);
        assert!((cost - (1.8 + 0.12 + 1.5)).abs() < 1e-9, "{cost}");
    }
}
