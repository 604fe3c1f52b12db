//! Lists a template can change, as Python's lists are: `ns.ids.append(x)`, `ns.ids.pop(0)`.
//!
//! minijinja's sequences are immutable values; Jinja2 (outside transformers' sandbox) and
//! llama.cpp's minja let a template mutate a list. Templates do it on lists kept in a
//! `namespace` (Kimi K2 queues its tool-call ids that way), so `namespace(...)` here turns
//! each list it is given into a [`PythonList`], and the rest of the `namespace` behaviour is
//! minijinja's own. transformers compiles templates in Jinja2's `ImmutableSandboxedEnvironment`,
//! which refuses these methods; [`ListMutations`] records that a render used one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use minijinja::value::{
    Enumerator, Object, ObjectRepr, Value, ValueKind, ValueOrKwargs, from_args,
};
use minijinja::{Error, ErrorKind, State};

/// Whether a render changed a list in place, which transformers' sandbox refuses.
#[derive(Debug, Default)]
pub struct ListMutations(AtomicBool);

impl ListMutations {
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    fn record(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A Python list: a sequence with the methods that change it in place.
#[derive(Debug)]
pub(super) struct PythonList {
    items: Mutex<Vec<Value>>,
    mutations: Arc<ListMutations>,
}

impl PythonList {
    fn new(items: Vec<Value>, mutations: Arc<ListMutations>) -> Self {
        Self {
            items: Mutex::new(items),
            mutations,
        }
    }

    fn items(&self) -> MutexGuard<'_, Vec<Value>> {
        // A panic while the lock is held cannot leave the vector half-changed.
        self.items.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A Python index (negative counts from the end) into a list of `len` items.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let resolved = if index < 0 { len + index } else { index };
    (0..len)
        .contains(&resolved)
        .then(|| usize::try_from(resolved).ok())
        .flatten()
}

fn index_error(method: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!("list.{method}: index out of range"),
    )
}

impl Object for PythonList {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Seq
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let index = i64::try_from(key.clone()).ok()?;
        let items = self.items();
        resolve_index(index, items.len()).and_then(|index| items.get(index).cloned())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.items().clone())
    }

    fn enumerator_len(self: &Arc<Self>) -> Option<usize> {
        Some(self.items().len())
    }

    fn call_method(
        self: &Arc<Self>,
        _state: &mut State<'_, '_>,
        method: &str,
        args: &[Value],
    ) -> Result<Value, Error> {
        let mutates = matches!(
            method,
            "append" | "extend" | "insert" | "pop" | "remove" | "clear" | "reverse"
        );
        if mutates {
            self.mutations.record();
        }
        match method {
            "append" => {
                let (item,): (Value,) = from_args(args)?;
                self.items().push(item);
                Ok(Value::from(()))
            }
            "extend" => {
                let (more,): (Value,) = from_args(args)?;
                let more: Vec<Value> = more.try_iter()?.collect();
                self.items().extend(more);
                Ok(Value::from(()))
            }
            "insert" => {
                let (index, item): (i64, Value) = from_args(args)?;
                let mut items = self.items();
                // Python clamps an insert position to the list.
                let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                let position = if index < 0 {
                    (len + index).max(0)
                } else {
                    index.min(len)
                };
                items.insert(usize::try_from(position).unwrap_or(0), item);
                Ok(Value::from(()))
            }
            "pop" => {
                let (index,): (Option<i64>,) = from_args(args)?;
                let mut items = self.items();
                let at = resolve_index(index.unwrap_or(-1), items.len())
                    .ok_or_else(|| index_error("pop"))?;
                Ok(items.remove(at))
            }
            "remove" => {
                let (item,): (Value,) = from_args(args)?;
                let mut items = self.items();
                let at = items
                    .iter()
                    .position(|candidate| *candidate == item)
                    .ok_or_else(|| {
                        Error::new(ErrorKind::InvalidOperation, "list.remove(x): x not in list")
                    })?;
                items.remove(at);
                Ok(Value::from(()))
            }
            "clear" => {
                let () = from_args(args)?;
                self.items().clear();
                Ok(Value::from(()))
            }
            "reverse" => {
                let () = from_args(args)?;
                self.items().reverse();
                Ok(Value::from(()))
            }
            "index" => {
                let (item,): (Value,) = from_args(args)?;
                self.items()
                    .iter()
                    .position(|candidate| *candidate == item)
                    .map(Value::from)
                    .ok_or_else(|| {
                        Error::new(ErrorKind::InvalidOperation, "list.index(x): x not in list")
                    })
            }
            "count" => {
                let (item,): (Value,) = from_args(args)?;
                let count = self
                    .items()
                    .iter()
                    .filter(|candidate| **candidate == item)
                    .count();
                Ok(Value::from(count))
            }
            "copy" => {
                let () = from_args(args)?;
                Ok(Value::from(self.items().clone()))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }
}

/// A list value as a [`PythonList`]; other values (tuples included) as they are.
fn mutable(value: Value, mutations: &Arc<ListMutations>) -> Value {
    if value.kind() == ValueKind::Seq && !value.is_tuple() {
        let items = value.try_iter().map(Iterator::collect).unwrap_or_default();
        Value::from_object(PythonList::new(items, Arc::clone(mutations)))
    } else {
        value
    }
}

/// `namespace(...)` whose lists can be changed in place; the namespace itself is minijinja's,
/// the only object `{% set ns.attr = ... %}` assigns to.
pub(super) fn namespace_with_lists(
    mutations: Arc<ListMutations>,
) -> impl Fn(Option<ValueOrKwargs>) -> Result<Value, Error> + Send + Sync + 'static {
    move |defaults: Option<ValueOrKwargs>| {
        let defaults = match defaults {
            Some(defaults) => {
                let defaults = defaults.into_value();
                let pairs = defaults
                    .as_object()
                    .filter(|object| matches!(object.repr(), ObjectRepr::Map))
                    .and_then(|object| object.try_iter_pairs());
                match pairs {
                    Some(pairs) => {
                        let converted: BTreeMap<Value, Value> = pairs
                            .map(|(key, value)| (key, mutable(value, &mutations)))
                            .collect();
                        Some(ValueOrKwargs::from(Value::from(converted)))
                    }
                    // Not a mapping: minijinja's own error.
                    None => Some(ValueOrKwargs::from(defaults)),
                }
            }
            None => None,
        };
        minijinja::functions::namespace(defaults)
    }
}
