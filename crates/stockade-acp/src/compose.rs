//! The agent `stockade acp` serves, composed by stockade-config
//! ([`stockade_config::agent`]); this crate adds only what ACP makes of the
//! model: its key as ACP authentication ([`ModelAuth`]).

use std::sync::Arc;

use stockade_agent::Answerer;
use stockade_config::Config;
pub use stockade_config::{EditorHooks, Environment, Sessions};
use stockade_model::ModelClient;

use crate::auth::{AuthedModel, ModelAuth};
use crate::error::ServeError;

/// Everything the server needs, composed once per process; prompts wait
/// for the model's key (see [`ModelAuth`]).
pub type Composition = stockade_config::Composition<Arc<ModelAuth>>;

/// Mount what `config` names (see [`stockade_config::agent`]). The API key
/// is read now; a missing one leaves the server up, asking the editor to
/// authenticate.
pub fn compose(
    config: &Config,
    env: &Environment,
    answerer: Arc<dyn Answerer>,
    editor: EditorHooks,
    sessions: &Sessions,
) -> Result<Composition, ServeError> {
    let model = |m: &stockade_model::ModelConfig| {
        let auth = Arc::new(ModelAuth::new(m.clone())?);
        let client: Arc<dyn ModelClient> = Arc::new(AuthedModel(auth.clone()));
        Ok((auth, client))
    };
    Ok(stockade_config::agent(
        config,
        env,
        answerer,
        editor,
        sessions,
        model,
        crate::log,
    )?)
}
