//! The tool lists runs offer, shared. Most runs offer the same tools as the
//! run before them (same channel, same permissions), so the list of specs is
//! built once and handed to every request as one `Arc`, instead of each run
//! deep-copying every tool's JSON schema and each model call copying them
//! again.

use std::sync::{Arc, Mutex};

use hearth_core::ToolSpec;
use hearth_tools::Tool;

/// Lists kept: one per channel and permission level in use is plenty.
const LISTS: usize = 8;

/// The tools a list was built from, and the list.
type Entry = (Vec<Arc<dyn Tool>>, Arc<[ToolSpec]>);

/// Recently offered tool lists, newest last, each with the tools it was
/// built from. Holding the tools keeps their addresses from being reused, so
/// comparing addresses is comparing tools: an MCP server whose tool list
/// changed brings new tool objects, hence a new list.
#[derive(Default)]
pub(super) struct OfferedLists {
    lists: Mutex<Vec<Entry>>,
}

impl OfferedLists {
    /// The specs of `tools`, shared with the last run that offered the same.
    pub(super) fn specs(&self, tools: Vec<Arc<dyn Tool>>) -> Arc<[ToolSpec]> {
        let mut lists = self
            .lists
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, specs)) = lists.iter().find(|(known, _)| same(known, &tools)) {
            return Arc::clone(specs);
        }
        let specs: Arc<[ToolSpec]> = tools.iter().map(|t| t.spec().clone()).collect();
        if lists.len() >= LISTS {
            lists.remove(0);
        }
        lists.push((tools, Arc::clone(&specs)));
        specs
    }
}

fn same(a: &[Arc<dyn Tool>], b: &[Arc<dyn Tool>]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| std::ptr::addr_eq(Arc::as_ptr(x), Arc::as_ptr(y)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use hearth_tools::{ToolClass, ToolContext, ToolError};
    use serde_json::{Value, json};

    struct Named(ToolSpec);

    #[async_trait]
    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }
        fn class(&self) -> ToolClass {
            ToolClass::Read
        }
        async fn call(&self, _: &ToolContext, _: Value) -> Result<Value, ToolError> {
            Ok(json!({}))
        }
    }

    fn tool(name: &str) -> Arc<dyn Tool> {
        Arc::new(Named(ToolSpec {
            name: name.into(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object", "properties": {"x": {"type": "string"}}}),
        }))
    }

    #[test]
    fn the_same_tools_share_one_list_and_other_tools_get_their_own() {
        let lists = OfferedLists::default();
        let (a, b) = (tool("a"), tool("b"));
        let first = lists.specs(vec![a.clone(), b.clone()]);
        let again = lists.specs(vec![a.clone(), b.clone()]);
        assert!(Arc::ptr_eq(&first, &again), "no copy for the same tools");
        let fewer = lists.specs(vec![a.clone()]);
        assert_eq!(fewer.len(), 1);
        assert_eq!(fewer[0].name, "a");
        // A tool replaced by a new object with the same name (an MCP server
        // that listed its tools again) is a new list with the new spec.
        let b2: Arc<dyn Tool> = Arc::new(Named(ToolSpec {
            name: "b".into(),
            description: "changed".into(),
            parameters: json!({"type": "object"}),
        }));
        let changed = lists.specs(vec![a.clone(), b2]);
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed[1].description, "changed");
        assert_eq!(lists.specs(vec![a, b])[1].description, "the b tool");
    }

    #[test]
    fn the_number_of_lists_kept_is_bounded() {
        let lists = OfferedLists::default();
        let tools: Vec<_> = (0..20).map(|i| tool(&format!("t{i}"))).collect();
        for t in &tools {
            lists.specs(vec![t.clone()]);
        }
        assert_eq!(lists.lists.lock().unwrap().len(), LISTS);
    }
}
